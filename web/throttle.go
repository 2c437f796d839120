package web

import (
	"context"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard/store"
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
// guesser can make the Pi burn neither guesses nor CPU. On SQLite the state lives
// in memory: a restart forgets it, which costs an attacker a restart they cannot
// cause. On PostgreSQL it lives in the database, shared by every serve.
const (
	throttleFree        = 3
	throttleNetworkFree = 10
	throttleBase        = 2 * time.Second
	throttleMax         = 15 * time.Minute
	throttleForget      = store.LoginThrottleForget // a key with no failure for this long starts afresh
	throttleEntries     = store.LoginThrottleRows   // bound on remembered keys
)

type throttleEntry struct {
	failures int
	last     time.Time
	until    time.Time
}

// failures are the failed logins by key.
type failures map[string]*throttleEntry

// throttle counts failures in memory, or with shared set (several serves on one
// PostgreSQL database) in the database, so that a guesser gains nothing by
// spreading guesses over the processes.
type throttle struct {
	mu      sync.Mutex
	now     func() time.Time
	entries failures
	shared  *store.Store
	log     *slog.Logger
}

func newThrottle(now func() time.Time) *throttle {
	return &throttle{now: now, entries: failures{}}
}

// with runs fn on the failures of keys: in memory under mu, or in the database in
// one transaction with their rows locked. If the database fails, the attempt is
// counted in memory: the password check that follows fails the same way.
func (t *throttle) with(keys []limit, fn func(c failures, now time.Time)) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shared == nil {
		fn(t.entries, t.now())
		return
	}
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.key
	}
	err := t.shared.UpdateLoginThrottle(context.Background(), names, func(m map[string]*store.ThrottleEntry) {
		c := failures{}
		for k, e := range m {
			c[k] = &throttleEntry{failures: e.Failures, last: e.Last, until: e.Until}
		}
		fn(c, t.now())
		clear(m)
		for k, e := range c {
			m[k] = &store.ThrottleEntry{Failures: e.failures, Last: e.last, Until: e.until}
		}
	})
	if err != nil {
		t.log.Warn("web: count failed logins in the database; counting in this process", "err", err)
		fn(t.entries, t.now())
	}
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
func (t *throttle) begin(keys []limit) (wait time.Duration, try *attempt) {
	t.with(keys, func(c failures, now time.Time) {
		for _, k := range keys {
			wait = max(wait, c.wait(k.key, now))
		}
		if wait > 0 {
			return
		}
		for _, k := range keys {
			c.fail(k.key, k.free, now)
		}
		try = &attempt{t: t, keys: keys}
	})
	return wait, try
}

// succeeded forgets the failures of the attempt's own keys and gives a shared
// one its attempt back.
func (a *attempt) succeeded() {
	a.t.with(a.keys, func(c failures, _ time.Time) {
		for _, k := range a.keys {
			if k.forget {
				delete(c, k.key)
			} else {
				c.giveBack(k.key, k.free)
			}
		}
	})
}

// failed leaves the attempt counted and returns the wait it imposes (0: the next
// attempt may go ahead).
func (a *attempt) failed() (wait time.Duration) {
	a.t.with(a.keys, func(c failures, now time.Time) {
		for _, k := range a.keys {
			wait = max(wait, c.wait(k.key, now))
		}
	})
	return wait
}

func (c failures) wait(key string, now time.Time) time.Duration {
	e := c[key]
	if e == nil {
		return 0
	}
	return max(e.until.Sub(now), 0)
}

// fail counts a failure of key, which may fail free times before it waits.
func (c failures) fail(key string, free int, now time.Time) {
	e := c[key]
	if e != nil && now.Sub(e.last) > throttleForget {
		e = nil
	}
	if e == nil {
		if len(c) >= throttleEntries {
			c.evict(now)
		}
		e = &throttleEntry{}
		c[key] = e
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
// spraying keys, the evictBatch entries idle the longest. (In the database,
// forgotten rows go as the counts are updated, and the reaper's pass bounds the
// table the same way: store.PruneLoginThrottle.)
func (c failures) evict(now time.Time) {
	for k, e := range c {
		if now.Sub(e.last) > throttleForget && now.After(e.until) {
			delete(c, k)
		}
	}
	if len(c) < throttleEntries {
		return
	}
	idle := slices.SortedFunc(maps.Keys(c), func(a, b string) int { return c[a].last.Compare(c[b].last) })
	for _, k := range idle[:min(evictBatch, len(idle))] {
		delete(c, k)
	}
}

// evictBatch is how many entries go at once when the bound is reached: a
// guesser spraying keys costs one pass over the entries per evictBatch new keys,
// not one per key, and needs 1% fewer keys to push an entry out.
const evictBatch = throttleEntries / 100

// abandoned gives the attempt back to every key: the password was not checked
// (the server was busy, or the store failed).
func (a *attempt) abandoned() {
	a.t.with(a.keys, func(c failures, _ time.Time) {
		for _, k := range a.keys {
			c.giveBack(k.key, k.free)
		}
	})
}

// giveBack uncounts one attempt of key, which may fail free times, and lifts its
// wait when that leaves it within them.
func (c failures) giveBack(key string, free int) {
	e := c[key]
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
