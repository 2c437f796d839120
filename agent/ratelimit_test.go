package agent

import (
	"testing"

	"github.com/switchboardhq/switchboard/store"
)

// The server's default rate limit is for module tools and webhook management,
// not the queue: an endpoint that sets no rate of its own drains without ever
// being told rate_limited, while its other calls still are. The server default
// here is two calls an hour, so the test does not depend on how fast it runs.
func TestQueueVerbsAreNotLimitedByTheDefault(t *testing.T) {
	e := newModuleEnvWith(t, func(c *envConfig) { c.agent.RatePerSecond, c.agent.RateBurst = 1.0/3600, 2 },
		ModuleOptions{}, fakeTool("alpha", "alpha_one"))
	_, cred := e.endpoint("fleet", []string{"inbox"}, nil, grant([]string{"alpha"}, nil, nil))
	const todos = 30 // 60 queue calls, thirty times the default's burst
	for range todos {
		e.addTodo("inbox", `{}`)
	}
	c := e.dial(cred, false)
	c.unchecked = true // the calls are the point, not their schemas (checked elsewhere)
	for i := range todos {
		var claim claimResult
		c.ok(t, VerbClaimNext, nil, &claim)
		if !claim.Claimed {
			t.Fatalf("claim_next %d: nothing claimed", i)
		}
		c.ok(t, VerbComplete, map[string]any{"todo_id": claim.Todo.ID, "lease_seq": claim.LeaseSeq}, nil)
	}
	c.ok(t, VerbListTodos, nil, nil)

	// A webhook verb and a module tool share the default's bucket: two calls,
	// then rate_limited.
	c.ok(t, VerbListWebhooks, nil, nil)
	c.ok(t, "alpha_one", map[string]any{"text": "hi"}, nil)
	if code := c.code(t, VerbListWebhooks, nil); code != CodeRateLimited {
		t.Fatalf("list_webhooks past the default: %s, want rate_limited", code)
	}
	if code := c.code(t, "alpha_one", map[string]any{"text": "hi"}); code != CodeRateLimited {
		t.Fatalf("a module tool past the default: %s, want rate_limited", code)
	}
	// The queue verbs still answer.
	c.ok(t, VerbListTodos, nil, nil)

	// An endpoint with a rate of its own has it on every call, the queue's too.
	_, capped := e.endpoint("capped", []string{"inbox"}, nil, func(s *store.EndpointSpec) {
		s.RatePerSecond, s.RateBurst = ptr(1.0/3600), ptr(1)
	})
	q := e.dial(capped, false)
	q.ok(t, VerbClaimNext, nil, nil)
	if code := q.code(t, VerbClaimNext, nil); code != CodeRateLimited {
		t.Fatalf("claim_next past the endpoint's own rate: %s, want rate_limited", code)
	}
}
