package agent

import (
	"context"
	"time"
)

// claim_next takes max for workers that want several todos at once (scripts that
// work a batch). Each todo is claimed as claim_next claims one, in turn, each under
// its own lease with its own lease_seq: heartbeat, complete, fail and release act
// on each alone, and each lapses alone. The answer lists them in claims; without
// max it is the one todo, as always.

// MaxClaimsPerCall is the most todos one claim_next may claim (its max).
const MaxClaimsPerCall = 50

// heldClaim is one todo of claim_next's claims: the todo and its own lease.
type heldClaim struct {
	Todo            *claimedTodo `json:"todo" jsonschema:"the claimed todo, with its payload"`
	LeaseSeq        int64        `json:"lease_seq" jsonschema:"this todo's fencing token: pass it as lease_seq to heartbeat, complete, fail and release"`
	LeaseExpiresAt  *time.Time   `json:"lease_expires_at" jsonschema:"when this todo's lease lapses unless a heartbeat extends it"`
	LeaseTTLSeconds int          `json:"lease_ttl_seconds" jsonschema:"the lease's length in seconds"`
}

// claimSeveral claims up to max todos from queues, one after another, until one
// finds nothing claimable. Those claimed stay claimed whatever happens to a later
// claim, so a failed one ends the list with why rather than fail the call: the
// worker must learn of every lease it holds.
func (a *Agent) claimSeveral(ctx context.Context, c *Call, queues []string, ttl time.Duration, max int) (claimResult, error) {
	claims := []heldClaim{}
	out := claimResult{Claims: &claims}
	for range max {
		r, err := a.claimFrom(ctx, c, queues, ttl)
		if err != nil && len(claims) == 0 {
			return claimResult{}, err
		}
		if err != nil {
			a.log.Warn("claim_next with max: a later claim failed", "endpoint", c.Endpoint.ID, "err", err)
			out.Message = "claiming more failed; those listed are yours: call claim_next again for more"
			break
		}
		if !r.Claimed {
			if len(claims) == 0 {
				out.Message = r.Message
			}
			break
		}
		claims = append(claims, heldClaim{r.Todo, r.LeaseSeq, r.LeaseExpiresAt, r.LeaseTTLSeconds})
	}
	out.Claimed = len(claims) > 0
	return out, nil
}
