package agent

import (
	"time"

	"github.com/switchboardhq/switchboard/store"
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

// ackThen stores a complete or fail of ack: through alone without claim_next
// (ttl nil), or through then, which claims the caller's next todo in the same
// write (one durable commit for both: store.CompleteThenClaim). The ack's
// session lease is forgotten before the next one's is remembered. The named
// todo's outcome stands whatever becomes of the claim, so a failed claim is
// answered as nothing claimed, with why, not as an error the worker could take
// for a failed complete.
func (a *Agent) ackThen(c *Call, verb string, ack store.Ack, ttl *time.Duration, alone func() (store.Todo, error),
	then func(queues []string, ttl time.Duration) (store.Todo, store.Next, error)) (store.Todo, *claimResult, error) {
	if ttl == nil || len(c.Endpoint.Queues) == 0 {
		t, err := alone()
		if err != nil {
			return t, nil, c.unfenced(verb, ack.ID, err)
		}
		c.finished(ack.ID)
		if ttl == nil {
			return t, nil, nil
		}
		return t, &claimResult{Message: noQueues}, nil
	}
	t, next, err := then(c.Endpoint.Queues, *ttl)
	if err != nil {
		return t, nil, c.unfenced(verb, ack.ID, err)
	}
	c.finished(ack.ID)
	if next.Err != nil {
		a.log.Warn("claim_next after "+verb+" failed", "endpoint", c.Endpoint.ID, "err", next.Err)
		return t, &claimResult{Message: "the todo above is stored, but claiming the next one failed; call claim_next"}, nil
	}
	r := claimResultOf(c, next.Todo, next.OK, *ttl)
	return t, &r, nil
}
