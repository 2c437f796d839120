package store

import (
	"context"
	"fmt"
	"slices"
	"sync"
)

// credCache keeps endpoints found by credential, each with the endpoint_epoch it
// was read under. An entry is used only while the epoch is unchanged: any insert,
// update or delete on endpoints moves it (migration 0009's triggers), whichever
// process made the change, so a revoked or edited endpoint is never answered from
// here. Unknown credentials are not kept.
type credCache struct {
	mu      sync.Mutex
	entries map[string]credEntry
}

type credEntry struct {
	epoch int64
	ep    Endpoint
}

// credCacheMax bounds the cache; past it, it starts again empty. A server has a
// handful of endpoints, so this is reached only by a churn of credentials.
const credCacheMax = 256

func (c *credCache) get(hash []byte, epoch int64) (Endpoint, bool) {
	c.mu.Lock()
	e, ok := c.entries[string(hash)]
	c.mu.Unlock()
	if !ok || e.epoch != epoch {
		return Endpoint{}, false
	}
	return e.ep.clone(), true
}

func (c *credCache) put(hash []byte, epoch int64, ep Endpoint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil || len(c.entries) >= credCacheMax {
		c.entries = make(map[string]credEntry)
	}
	c.entries[string(hash)] = credEntry{epoch: epoch, ep: ep.clone()}
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
// through the cache under key. It reads endpoint_epoch first: if the endpoint
// changes in between, the entry carries the older epoch and is not used again.
// what names the lookup in errors; none found is ErrNotFound.
func (s *Store) liveEndpointBy(ctx context.Context, key []byte, what, where string, arg any) (Endpoint, error) {
	epoch, err := s.endpointEpoch(ctx)
	if err != nil {
		return Endpoint{}, fmt.Errorf("store: look up %s: read endpoint epoch: %w", what, err)
	}
	if e, ok := s.creds.get(key, epoch); ok {
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
	s.creds.put(key, epoch, e)
	return e, nil
}
