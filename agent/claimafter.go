package agent

import (
	"context"
	"time"
)

// complete and fail take claim_next=true to claim the caller's next todo in the
// same call, so that a worker's loop is one tool call a todo instead of two. The
// todo named is acted on first, exactly as without the option; only once that is
// stored is the next one claimed, by the same claim claim_next makes (every queue
// the endpoint works, the endpoint's default lease), and the answer's next holds
// what claim_next would have answered.

// nextLease checks, before the named todo is touched, that the caller may claim
// the next one: it returns the lease the claim will get, or nil when claim_next
// was not asked for. A refusal here leaves the named todo as it was.
func nextLease(c *Call, want bool) (*time.Duration, error) {
	if !want {
		return nil, nil
	}
	if err := checkScope(c.Endpoint, VerbClaimNext); err != nil {
		return nil, err
	}
	ttl, err := lease(c.Endpoint, nil)
	if err != nil {
		return nil, err
	}
	return &ttl, nil
}

// claimAfter claims the next todo for a complete or fail that asked for it (ttl
// set) and has been stored. The named todo's outcome stands whatever happens
// here, so a failed claim is answered as nothing claimed, with why, not as an
// error the worker could take for a failed complete.
func (a *Agent) claimAfter(ctx context.Context, c *Call, verb string, ttl *time.Duration) *claimResult {
	if ttl == nil {
		return nil
	}
	next, err := a.claimFrom(ctx, c, c.Endpoint.Queues, *ttl)
	if err != nil {
		a.log.Warn("claim_next after "+verb+" failed", "endpoint", c.Endpoint.ID, "err", err)
		return &claimResult{Message: "the todo above is stored, but claiming the next one failed; call claim_next"}
	}
	return &next
}
