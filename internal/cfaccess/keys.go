package cfaccess

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/switchboardhq/switchboard/internal/egress"
)

const (
	// keysMaxAge: keys fetched longer ago are fetched again on the next
	// assertion, so that a key the team withdrew stops verifying. Access keeps
	// a rotated-out key published for days, so an hour loses no valid token.
	keysMaxAge = time.Hour
	// refetchEvery is the least time between two fetches: an assertion naming a
	// key id not in the set fetches it again (a rotation), but a stream of
	// made-up key ids fetches at most this often.
	refetchEvery = 10 * time.Second
	// maxKeysBytes bounds the key set's answer (Access's is a few KB).
	maxKeysBytes = 1 << 20
	fetchTimeout = 10 * time.Second
	minRSABits   = 2048
)

// defaultClient fetches from public addresses only: a team domain that
// resolves to loopback, a private or a link-local address is refused.
func defaultClient() *http.Client {
	return egress.NewClient(&egress.Dialer{Guard: egress.Guard{}, Timeout: fetchTimeout}, fetchTimeout)
}

// keyCache holds the team's signing keys by key id.
type keyCache struct {
	url    string
	client *http.Client
	now    func() time.Time
	log    *slog.Logger

	mu      sync.Mutex
	keys    map[string]*rsa.PublicKey
	fetched time.Time     // when keys were fetched
	tried   time.Time     // when the last fetch began
	flight  chan struct{} // closed when the fetch under way ends; nil when none is
}

// get returns the key kid: from the cache while it is fresh, else after a
// fetch, at most one every refetchEvery (callers meanwhile wait for the fetch
// under way). A key id the team does not publish is a refusal.
func (c *keyCache) get(ctx context.Context, kid string) (*rsa.PublicKey, error) {
	for fetchedByUs := false; ; {
		c.mu.Lock()
		key, known := c.keys[kid]
		now := c.now()
		switch {
		case known && now.Sub(c.fetched) < keysMaxAge:
			c.mu.Unlock()
			return key, nil
		case c.flight != nil:
			flight := c.flight
			c.mu.Unlock()
			select {
			case <-flight:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case fetchedByUs || (!c.tried.IsZero() && now.Sub(c.tried) < refetchEvery):
			none := c.keys == nil
			c.mu.Unlock()
			if known {
				return key, nil // stale, but the fetch failed or ran just now
			}
			if none {
				return nil, fmt.Errorf("%w: the team's signing keys could not be fetched (the log says why)", ErrRefused)
			}
			// The key id is left out: the message is a log key (agent's accessRefused).
			return nil, fmt.Errorf("%w: signed with a key the team does not publish (kid)", ErrRefused)
		}
		c.tried, c.flight = now, make(chan struct{})
		c.mu.Unlock()
		c.refresh(ctx)
		fetchedByUs = true
	}
}

// refresh fetches the key set and, when that works, replaces the cached one.
// The request's cancellation does not end it: others wait on its result.
func (c *keyCache) refresh(ctx context.Context) {
	keys, err := c.fetch(context.WithoutCancel(ctx))
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.log.Error("fetch the Cloudflare Access signing keys", "url", c.url, "err", err)
	} else {
		c.keys, c.fetched = keys, c.now()
	}
	close(c.flight)
	c.flight = nil
}

// fetch reads the key set: a JSON Web Key Set whose usable keys are RSA
// signing keys of at least 2048 bits with a key id. Others (another type, an
// encryption key) are skipped; a set without a usable key is an error.
func (c *keyCache) fetch(ctx context.Context) (map[string]*rsa.PublicKey, error) {
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("answered %s", resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKeysBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read the answer: %w", err)
	}
	if len(body) > maxKeysBytes {
		return nil, fmt.Errorf("answer larger than %d bytes", maxKeysBytes)
	}
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("not a JSON Web Key Set: %w", err)
	}
	keys := map[string]*rsa.PublicKey{}
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if json.Unmarshal(raw, &k) != nil || k.KeyID == "" || (k.Use != "" && k.Use != "sig") ||
			(k.Algorithm != "" && k.Algorithm != string(jose.RS256)) {
			continue
		}
		if pub, ok := k.Key.(*rsa.PublicKey); ok && pub.N.BitLen() >= minRSABits {
			keys[k.KeyID] = pub
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("the key set holds no RSA signing key of %d bits or more", minRSABits)
	}
	return keys, nil
}
