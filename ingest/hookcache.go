package ingest

import (
	"context"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// hookCache keeps what a token resolved to (the webhook and its opened secrets), so
// that a delivery costs no database read and no decryption before its write. It is
// never trusted on its own: a delivery that fails verification against cached
// secrets is checked again against the database's, and the write refuses a delivery
// verified against secrets that have been rotated since (store.ErrStale), so a
// rotation or deletion, even by another process on the same file, takes effect on
// the next delivery exactly as without the cache. Only tokens of webhooks that
// exist are kept, so unknown tokens cannot grow it.
type hookCache struct {
	store *store.Store
	now   func() time.Time

	mu      sync.Mutex
	entries map[string]cachedHook
}

type cachedHook struct {
	hook    store.Webhook
	secrets []string // current, then previous while its grace lasted when read
}

// maxCachedHooks bounds the cache; past it the cache starts over. A server has
// far fewer live webhooks than this.
const maxCachedHooks = 4096

func newHookCache(st *store.Store, now func() time.Time) *hookCache {
	return &hookCache{store: st, now: now, entries: map[string]cachedHook{}}
}

// lookup resolves token. fresh skips the cache; cached says the answer came from it.
func (c *hookCache) lookup(ctx context.Context, token string, fresh bool) (h store.Webhook, secrets []string, cached bool, err error) {
	if !fresh {
		c.mu.Lock()
		e, ok := c.entries[token]
		c.mu.Unlock()
		if ok {
			secrets = e.secrets
			// The previous secret's grace may have ended since it was read.
			if len(secrets) > 1 && !e.hook.PreviousSecretLive(c.now()) {
				secrets = secrets[:1]
			}
			return e.hook, secrets, true, nil
		}
	}
	h, secrets, err = c.store.WebhookByToken(ctx, token)
	if err != nil {
		c.forget(token)
		return store.Webhook{}, nil, false, err
	}
	c.mu.Lock()
	if len(c.entries) >= maxCachedHooks {
		clear(c.entries)
	}
	c.entries[token] = cachedHook{hook: h, secrets: secrets}
	c.mu.Unlock()
	return h, secrets, false, nil
}

// forget drops token, for a webhook found deleted.
func (c *hookCache) forget(token string) {
	c.mu.Lock()
	delete(c.entries, token)
	c.mu.Unlock()
}
