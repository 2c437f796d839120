package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// credCache keeps endpoints found by credential, each with the generation it was
// read under. The generation moves on whenever endpoints may have changed, so an
// entry is used only while nothing changed since it was read, and a revoked or
// edited endpoint is never answered from here. Unknown credentials are not kept.
//
// What moves the generation: this process's own endpoint changes, as they commit
// (changed); and any new reading of endpoint_epoch, which every insert, update
// and delete on endpoints moves, whichever process made it (migration 0009's
// triggers; seen). While the foreign-commit watch runs it reads the epoch at each
// look that finds a commit from elsewhere, so a lookup need not: it reads the
// epoch itself only when the watch has not looked within credWatchFresh.
type credCache struct {
	mu      sync.Mutex
	entries map[string]credEntry
	epoch   int64 // endpoint_epoch as last read
	gen     int64
	// looked is when the watch last looked: every commit made before it, by
	// any process, has moved gen if it changed an endpoint.
	looked atomic.Pointer[time.Time]
	// rung is when a ring from another process last rang here, from its
	// notification, ahead of the watch's look: the commit it announces (an
	// endpoint's revocation handing its todos back) may not have moved gen yet.
	rung atomic.Pointer[time.Time]
}

// credWatchFresh is how recent the watch's last look must be for a lookup to
// trust the generation without reading endpoint_epoch: a change made by another
// process reaches this one's lookups within it. serve's watch looks every half
// second, and at once on PostgreSQL's notifications.
const credWatchFresh = time.Second

type credEntry struct {
	gen int64
	ep  Endpoint
}

// credCacheMax bounds the cache; past it, it starts again empty. A server has a
// handful of endpoints, so this is reached only by a churn of credentials.
const credCacheMax = 256

func (c *credCache) get(hash []byte, gen int64) (Endpoint, bool) {
	c.mu.Lock()
	e, ok := c.entries[string(hash)]
	c.mu.Unlock()
	if !ok || e.gen != gen {
		return Endpoint{}, false
	}
	return e.ep.clone(), true
}

func (c *credCache) put(hash []byte, gen int64, ep Endpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= credCacheMax {
		c.entries = make(map[string]credEntry)
	}
	c.entries[string(hash)] = credEntry{gen: gen, ep: ep.clone()}
}

// generation is the generation now.
func (c *credCache) generation() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gen
}

// changed moves the generation on: this process changed an endpoint, and has
// committed the change.
func (c *credCache) changed() {
	c.mu.Lock()
	c.gen++
	c.mu.Unlock()
}

// seen notes a reading of endpoint_epoch; one unlike the last moves the
// generation on. (Readings taken side by side may arrive out of order: that
// costs a needless move, never a missed one.)
func (c *credCache) seen(epoch int64) {
	c.mu.Lock()
	if epoch != c.epoch {
		c.epoch = epoch
		c.gen++
	}
	c.mu.Unlock()
}

// watched notes that the watch looked at at: every commit before it is seen.
func (c *credCache) watched(at time.Time) { c.looked.Store(&at) }

// rang notes that a ring from another process is about to ring here: until the
// watch looks again, lookups read endpoint_epoch themselves, so that an agent
// woken by the ring is checked against the commit that rang it.
func (c *credCache) rang() {
	now := time.Now()
	c.rung.Store(&now)
}

// watchedLately reports whether the watch looked within credWatchFresh, and
// after the last ring from another process.
func (c *credCache) watchedLately() bool {
	at := c.looked.Load()
	if at == nil || time.Since(*at) >= credWatchFresh {
		return false
	}
	rung := c.rung.Load()
	return rung == nil || at.After(*rung)
}

// clone copies the lists, so that no caller shares them with the cache.
func (e Endpoint) clone() Endpoint {
	e.Verbs, e.Queues = slices.Clone(e.Verbs), slices.Clone(e.Queues)
	e.Ceiling.Sources, e.Ceiling.Queues = slices.Clone(e.Ceiling.Sources), slices.Clone(e.Ceiling.Queues)
	e.Capabilities, e.ToolAllow, e.ToolDeny = slices.Clone(e.Capabilities), slices.Clone(e.ToolAllow), slices.Clone(e.ToolDeny)
	if e.RevokedAt != nil {
		t := *e.RevokedAt
		e.RevokedAt = &t
	}
	return e
}

// liveEndpointBy finds the live endpoint whose column matches (where, with arg),
// through the cache under key. It takes the generation first: if the endpoint
// changes in between, the entry carries the older one and is not used again.
// what names the lookup in errors; none found is ErrNotFound.
func (s *Store) liveEndpointBy(ctx context.Context, key []byte, what, where string, arg any) (Endpoint, error) {
	if !s.creds.watchedLately() {
		epoch, err := s.endpointEpoch(ctx)
		if err != nil {
			return Endpoint{}, fmt.Errorf("store: look up %s: read endpoint epoch: %w", what, err)
		}
		s.creds.seen(epoch)
	}
	gen := s.creds.generation()
	if e, ok := s.creds.get(key, gen); ok {
		return e, nil
	}
	e, err := scanEndpoint(s.queryRow(ctx, `SELECT `+endpointColumns+` FROM endpoints
		WHERE `+where+` AND revoked_at IS NULL`, arg))
	if notFound(err) {
		return Endpoint{}, fmt.Errorf("store: %s: %w", what, ErrNotFound)
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("store: look up %s: %w", what, err)
	}
	s.creds.put(key, gen, e)
	return e, nil
}
