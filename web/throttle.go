package web

import (
	"context"
	"net"
	"sync"
	"time"
)

// Login throttling. Wrong passwords are counted against keys: from a browser not
// known to be the operator's, per username and client address, and per client
// network (the address; for IPv6 its /64, which one machine is commonly given
// whole); from a browser where the operator logged in before, per that browser
// (its device cookie, see device.go), whatever its address; on the Account page,
// per session. After throttleFree failures of a key, or throttleNetworkFree of a
// network (a guesser trying many usernames), every further failure doubles a wait
// during which that key may not try again (throttleBase, 2×, 4× … up to
// throttleMax).
//
// An attempt is counted when it starts, before the password hash is computed, and
// given back only if it succeeds: attempts sent together cannot all pass the check
// before the first of them has failed, and a refused one costs no bcrypt, so a
// guesser can make the Pi burn neither guesses nor CPU. The state lives in memory:
// a restart forgets it, which costs an attacker a restart they cannot cause.
const (
	throttleFree        = 3
	throttleNetworkFree = 10
	throttleBase        = 2 * time.Second
	throttleMax         = 15 * time.Minute
	throttleForget      = time.Hour // a key with no failure for this long starts afresh
	throttleEntries     = 10000     // bound on remembered keys
)

type throttleEntry struct {
	failures int
	last     time.Time
	until    time.Time
}

type throttle struct {
	mu      sync.Mutex
	now     func() time.Time
	entries map[string]*throttleEntry
}

func newThrottle(now func() time.Time) *throttle {
	return &throttle{now: now, entries: map[string]*throttleEntry{}}
}

// throttleKey is the pair an attempt is counted against first.
func throttleKey(username, ip string) string { return username + "\x00" + ip }

// networkKey is the network an attempt is counted against too: the address, or an
// IPv6 address's /64.
func networkKey(ip string) string {
	a := net.ParseIP(ip)
	if a == nil || a.To4() != nil {
		return "\x00net\x00" + ip
	}
	return "\x00net\x00" + a.Mask(net.CIDRMask(64, 128)).String() + "/64"
}

// limit is one key an attempt counts against: free failures before it waits,
// and whether a success forgets its failures (an attempt's own: a pair, a device,
// a session) or gives back its one (a network many share).
type limit struct {
	key    string
	free   int
	forget bool
}

// byAddress are the keys of a login from a browser not known to be the
// operator's: the username and address, and the address's network.
func byAddress(username, ip string) []limit {
	return []limit{{throttleKey(username, ip), throttleFree, true}, {networkKey(ip), throttleNetworkFree, false}}
}

// byDevice is the key of a login from a browser where username logged in before
// (its device cookie's nonce): whatever its address, and whatever others at that
// address do. byDevice(…) for a session's password change is keyed on the session.
func byDevice(id string) []limit { return []limit{{"\x00device\x00" + id, throttleFree, true}} }

// attempt is one password check under way, counted against its keys.
type attempt struct {
	t    *throttle
	keys []limit
}

// begin starts a password check counted against keys. When one must still wait,
// it returns how long, and nothing is counted; else it counts the attempt as a
// failure of each at once, and the caller reports how it went (succeeded, failed
// or abandoned).
func (t *throttle) begin(keys []limit) (time.Duration, *attempt) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var wait time.Duration
	for _, k := range keys {
		wait = max(wait, t.waitLocked(k.key, now))
	}
	if wait > 0 {
		return wait, nil
	}
	for _, k := range keys {
		t.failLocked(k.key, k.free, now)
	}
	return 0, &attempt{t: t, keys: keys}
}

// succeeded forgets the failures of the attempt's own keys and gives a shared
// one its attempt back.
func (a *attempt) succeeded() {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	for _, k := range a.keys {
		if k.forget {
			delete(a.t.entries, k.key)
		} else {
			a.t.giveBack(k.key, k.free)
		}
	}
}

// failed leaves the attempt counted and returns the wait it imposes (0: the next
// attempt may go ahead).
func (a *attempt) failed() time.Duration {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	now := a.t.now()
	var wait time.Duration
	for _, k := range a.keys {
		wait = max(wait, a.t.waitLocked(k.key, now))
	}
	return wait
}

func (t *throttle) waitLocked(key string, now time.Time) time.Duration {
	e := t.entries[key]
	if e == nil {
		return 0
	}
	return max(e.until.Sub(now), 0)
}

// failLocked counts a failure of key, which may fail free times before it waits.
func (t *throttle) failLocked(key string, free int, now time.Time) {
	e := t.entries[key]
	if e != nil && now.Sub(e.last) > throttleForget {
		e = nil
	}
	if e == nil {
		if len(t.entries) >= throttleEntries {
			t.evict(now)
		}
		e = &throttleEntry{}
		t.entries[key] = e
	}
	e.failures++
	e.last = now
	if e.failures <= free {
		return
	}
	d := throttleBase
	for i := free + 1; i < e.failures && d < throttleMax; i++ {
		d *= 2
	}
	e.until = now.Add(min(d, throttleMax))
}

// evict makes room: first everything forgotten anyway, then, if an attacker is
// spraying keys, the entry idle the longest. Called with mu held.
func (t *throttle) evict(now time.Time) {
	var oldestKey string
	var oldest time.Time
	for k, e := range t.entries {
		if now.Sub(e.last) > throttleForget && now.After(e.until) {
			delete(t.entries, k)
			continue
		}
		if oldestKey == "" || e.last.Before(oldest) {
			oldestKey, oldest = k, e.last
		}
	}
	if len(t.entries) >= throttleEntries && oldestKey != "" {
		delete(t.entries, oldestKey)
	}
}

// abandoned gives the attempt back to every key: the password was not checked
// (the server was busy, or the store failed).
func (a *attempt) abandoned() {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	for _, k := range a.keys {
		a.t.giveBack(k.key, k.free)
	}
}

// giveBack uncounts one attempt of key, which may fail free times, and lifts its
// wait when that leaves it within them. Called with mu held.
func (t *throttle) giveBack(key string, free int) {
	e := t.entries[key]
	if e == nil || e.failures == 0 {
		return
	}
	e.failures--
	if e.failures <= free {
		e.until = time.Time{}
	}
}

// hashSlots bounds the password checks (bcrypt, ~0.1 s of a core each on a Pi) run
// at once, across every username and address: guessers from many addresses, each
// within its throttle, still leave cores for the rest of the server.
type hashSlots chan struct{}

// hashWait is how long a password check waits for a slot before the login is
// answered as busy.
const hashWait = 5 * time.Second

func newHashSlots(n int) hashSlots { return make(hashSlots, max(n, 1)) }

// acquire takes a slot, waiting up to hashWait or until ctx ends; ok is false when
// none came free. release gives it back.
func (s hashSlots) acquire(ctx context.Context) (release func(), ok bool) {
	timer := time.NewTimer(hashWait)
	defer timer.Stop()
	select {
	case s <- struct{}{}:
		return func() { <-s }, true
	case <-timer.C:
	case <-ctx.Done():
	}
	return nil, false
}
