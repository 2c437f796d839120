package web

import (
	"context"
	"net"
	"sync"
	"time"
)

// Login throttling. Wrong passwords are counted twice: per username and client
// address, and per client network (the address; for IPv6 its /64, which one
// machine is commonly given whole). After throttleFree failures of a pair, or
// throttleNetworkFree of a network (a guesser trying many usernames), every further
// failure doubles a wait during which that pair or network may not try again
// (throttleBase, 2×, 4× … up to throttleMax).
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

// attempt is one password check under way, counted against its keys (net is ""
// for a trusted one).
type attempt struct {
	t         *throttle
	pair, net string
}

// begin starts a password check by username from ip. When the pair or the
// network must still wait, it returns how long, and nothing is counted; else it
// counts the attempt as a failure of both at once, and the caller reports how it
// went (succeeded or failed). A trusted attempt (from a browser where username
// logged in before: a device cookie) is counted against its pair alone, so that
// guessers sharing the operator's address (an office, a /64, a proxy that does
// not forward it) cannot lock the operator out.
func (t *throttle) begin(username, ip string, trusted bool) (time.Duration, *attempt) {
	a := &attempt{t: t, pair: throttleKey(username, ip)}
	if !trusted {
		a.net = networkKey(ip)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if wait := max(t.waitLocked(a.pair, now), t.waitLocked(a.net, now)); wait > 0 {
		return wait, nil
	}
	t.failLocked(a.pair, throttleFree, now)
	if a.net != "" {
		t.failLocked(a.net, throttleNetworkFree, now)
	}
	return 0, a
}

// succeeded forgets the pair's failures and gives the network its attempt back.
func (a *attempt) succeeded() {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	delete(a.t.entries, a.pair)
	a.t.giveBack(a.net, throttleNetworkFree)
}

// failed leaves the attempt counted and returns the wait it imposes on the pair
// or the network (0: the next attempt may go ahead).
func (a *attempt) failed() time.Duration {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	now := a.t.now()
	return max(a.t.waitLocked(a.pair, now), a.t.waitLocked(a.net, now))
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

// abandoned gives the attempt back to both keys: the password was not checked
// (the server was busy, or the store failed).
func (a *attempt) abandoned() {
	a.t.mu.Lock()
	defer a.t.mu.Unlock()
	a.t.giveBack(a.pair, throttleFree)
	a.t.giveBack(a.net, throttleNetworkFree)
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
