package ingest

import (
	"log/slog"
	"sync"

	"github.com/switchboardhq/switchboard/store"
)

// ruleCache keeps each webhook's rules parsed, by their text, so that a delivery
// does not parse them again. Rules change rarely; the cache is dropped whole if
// it ever grows past ruleCacheMax texts.
type ruleCache struct {
	mu     sync.Mutex
	parsed map[string]*Rules
}

const ruleCacheMax = 1024

// decide applies hook's rules to a verified delivery: whether it is filtered,
// and the options of its todo. Rules that no longer parse (they were checked
// when set, so only a newer version's rules read by an older one) are logged and
// ignored: the delivery makes a plain todo rather than being lost.
func (c *ruleCache) decide(log *slog.Logger, hook store.Webhook, eventType string, body []byte) Decision {
	text := hook.RulesJSON()
	if len(text) == 0 {
		return Decision{}
	}
	c.mu.Lock()
	r, ok := c.parsed[string(text)]
	c.mu.Unlock()
	if !ok {
		var err error
		if r, err = ParseRules(text); err != nil {
			log.Error("webhook rules do not parse; the delivery makes a plain todo", "webhook_id", hook.ID,
				"err", RulesMessage(err))
			return Decision{}
		}
		c.mu.Lock()
		if c.parsed == nil || len(c.parsed) >= ruleCacheMax {
			c.parsed = map[string]*Rules{}
		}
		c.parsed[string(text)] = r
		c.mu.Unlock()
	}
	return r.Apply(eventType, body)
}
