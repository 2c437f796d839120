package web

import (
	"sync"
	"time"
)

// Login throttling. Failures are counted per username and client address; after
// throttleFree of them every further failure doubles a wait during which that pair
// may not try again (throttleBase, 2×, 4× … up to throttleMax). The check comes before
// the password hash is computed, so a guesser cannot make the Pi burn bcrypt either.
// The state lives in memory: a restart forgets it, which costs an attacker a restart
// they cannot cause.
const (
	throttleFree    = 3
	throttleBase    = 2 * time.Second
	throttleMax     = 15 * time.Minute
	throttleForget  = time.Hour // a pair with no failure for this long starts afresh
	throttleEntries = 10000     // bound on remembered pairs
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

func throttleKey(username, ip string) string { return username + "\x00" + ip }

// wait says how long key must still wait before its next attempt (0: go ahead).
func (t *throttle) wait(key string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.entries[key]
	if e == nil {
		return 0
	}
	return max(e.until.Sub(t.now()), 0)
}

// fail records a failed attempt and returns the wait it imposes.
func (t *throttle) fail(key string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
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
	if e.failures <= throttleFree {
		return 0
	}
	d := throttleBase
	for i := throttleFree + 1; i < e.failures && d < throttleMax; i++ {
		d *= 2
	}
	d = min(d, throttleMax)
	e.until = now.Add(d)
	return d
}

// succeed forgets key's failures.
func (t *throttle) succeed(key string) {
	t.mu.Lock()
	delete(t.entries, key)
	t.mu.Unlock()
}

// evict makes room: first everything forgotten anyway, then, if an attacker is
// spraying pairs, the entry idle the longest. Called with mu held.
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
