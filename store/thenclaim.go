package store

import (
	"context"
	"slices"
	"time"
)

// A worker's complete (or fail) and the claim of its next todo, in one write:
// the claim runs in the same transaction, right after the complete and only if
// the complete was made, so the two cost one durable commit, not two. The
// complete's outcome stands whatever becomes of the claim: the claim has its own
// savepoint (or, pipelined on PostgreSQL, claims nothing when the complete
// changed nothing; see pgClaimAfter).

// Next is the claim a complete or a fail made after it: the todo claimed (OK),
// nothing claimable (not OK, Err nil), or the claim's own error.
type Next struct {
	Todo Todo
	OK   bool
	Err  error
}

// CompleteThenClaim is Complete, then ClaimNext for a.Owner on queues with ttl
// once the complete is made. err is the complete's; the claim's is next.Err.
func (s *Store) CompleteThenClaim(ctx context.Context, a Ack, result string, queues []string, ttl time.Duration) (t Todo, next Next, err error) {
	return s.thenClaim(ctx, a, s.completeReq(ctx, a, result, &t), queues, ttl, &t)
}

// FailThenClaim is Fail, then ClaimNext as CompleteThenClaim makes it.
func (s *Store) FailThenClaim(ctx context.Context, a Ack, errText string, retry bool, queues []string, ttl time.Duration) (t Todo, next Next, err error) {
	return s.thenClaim(ctx, a, s.failReq(ctx, a, errText, retry, &t), queues, ttl, &t)
}

// thenClaim submits lead, the write that acks a, and the claim after it; t is
// where lead leaves its todo.
func (s *Store) thenClaim(ctx context.Context, a Ack, lead *writeReq, queues []string, ttl time.Duration, t *Todo) (Todo, Next, error) {
	var out claimed
	follow := s.claimReq(ctx, a.Owner, queues, ttl, &a, &out)
	if err := s.submitThen(ctx, lead, follow); err != nil {
		return Todo{}, Next{}, err // whatever a run rolled back left in t
	}
	if follow.err != nil {
		return *t, Next{Err: follow.err}, nil // whatever a run rolled back left in out
	}
	return *t, Next{Todo: out.t, OK: out.ok}, nil
}

// ackedTwice reports whether batch holds a follow-up and two writes that ack
// one todo (a complete sent twice, a fail beside it). Pipelined, the
// follow-up's claim could not tell its lead's change of the todo from the
// other write's (pgClaimAfter): such a batch runs under savepoints, where the
// writer checks the lead itself before the claim runs.
func ackedTwice(batch []*writeReq) bool {
	if !slices.ContainsFunc(batch, func(r *writeReq) bool { return r.lead != nil }) {
		return false
	}
	acks := make([]int64, 0, len(batch))
	for _, r := range batch {
		if r.one != nil && r.one.ack != 0 {
			acks = append(acks, r.one.ack)
		}
	}
	slices.Sort(acks)
	return len(slices.Compact(acks)) < len(acks)
}
