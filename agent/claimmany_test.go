package agent

import (
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// severalResult is claim_next's answer with max.
type severalResult struct {
	Claimed bool         `json:"claimed"`
	Claims  *[]heldClaim `json:"claims"`
	Message string       `json:"message"`
	Todo    *claimedTodo `json:"todo"`
}

// claim_next with max claims up to max todos, oldest first, each under a lease of
// its own: its own lease_seq and expiry, acted on alone, lapsing alone; the
// session remembers every one. An empty queue answers an empty list.
func TestClaimNextMax(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("batch", []string{"inbox"}, nil)
	c, other := e.dial(cred, false), e.dial(cred, false)
	a, b, d := e.addTodo("inbox", "a"), e.addTodo("inbox", "b"), e.addTodo("inbox", "d")
	var got severalResult
	c.ok(t, VerbClaimNext, map[string]any{"max": 2, "lease_ttl_seconds": 60}, &got)
	if !got.Claimed || got.Claims == nil || len(*got.Claims) != 2 || got.Todo != nil {
		t.Fatalf("claim_next max 2 = %+v", got)
	}
	cl := *got.Claims
	for i, want := range []store.Todo{a, b} {
		h := cl[i]
		row := e.todo(want.ID)
		if h.Todo == nil || h.Todo.ID != want.ID || h.Todo.Payload != row.Payload || h.LeaseTTLSeconds != 60 ||
			row.State != store.StateClaimed || row.LeaseSeq != h.LeaseSeq || !row.LeaseExpiry.Equal(*h.LeaseExpiresAt) {
			t.Fatalf("claims[%d] = %+v, row %+v; want todo %d under its own lease", i, h, row, want.ID)
		}
	}
	if row := e.todo(d.ID); row.State != store.StatePending {
		t.Fatalf("todo %d beyond max is %s", d.ID, row.State)
	}

	// Each lease is its own: a heartbeat keeps b's alive while a's lapses.
	e.clock.Add(50 * time.Second)
	c.ok(t, VerbHeartbeat, map[string]any{"todo_id": b.ID, "lease_seq": cl[1].LeaseSeq, "lease_ttl_seconds": 60}, nil)
	e.clock.Add(11 * time.Second)
	requeue(t, e) // a only
	var stolen claimResult
	other.ok(t, VerbClaim, map[string]any{"todo_id": a.ID}, &stolen)
	// Fencing on each: the lapsed lease is refused, with lease_seq or by the
	// session's memory, and b's, alive, completes without lease_seq.
	for _, args := range []map[string]any{{"todo_id": a.ID, "lease_seq": cl[0].LeaseSeq}, {"todo_id": a.ID}} {
		if code := c.code(t, VerbComplete, args); code != CodeConflict {
			t.Errorf("complete %v on the lapsed lease: %s, want conflict", args, code)
		}
	}
	if code := c.code(t, VerbComplete, map[string]any{"todo_id": b.ID, "lease_seq": cl[1].LeaseSeq + 1}); code != CodeConflict {
		t.Errorf("complete of todo %d with a lease_seq it never had: %s, want conflict", b.ID, code)
	}
	c.ok(t, VerbComplete, map[string]any{"todo_id": b.ID}, nil)
	if row := e.todo(a.ID); row.State != store.StateClaimed || row.LeaseSeq != stolen.LeaseSeq {
		t.Fatalf("todo %d is %s under lease %d, want the other worker's %d", a.ID, row.State, row.LeaseSeq, stolen.LeaseSeq)
	}
	if row := e.todo(b.ID); row.State != store.StateDone {
		t.Fatalf("todo %d is %s, want done", b.ID, row.State)
	}

	// Fewer left than max: those there are. None left: an empty list, and why.
	c.ok(t, VerbClaimNext, map[string]any{"max": 50}, &got)
	if !got.Claimed || len(*got.Claims) != 1 || (*got.Claims)[0].Todo.ID != d.ID {
		t.Fatalf("claim_next max 50 with one left = %+v", got)
	}
	got = severalResult{}
	c.ok(t, VerbClaimNext, map[string]any{"max": 3}, &got)
	if got.Claimed || got.Claims == nil || len(*got.Claims) != 0 || got.Message == "" {
		t.Fatalf("claim_next max 3 on an empty queue = %+v", got)
	}
}

// max outside 1–50 is refused before anything is claimed.
func TestClaimNextMaxBounds(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("batch", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	a := e.addTodo("inbox", "a")
	for _, max := range []any{0, -1, MaxClaimsPerCall + 1, 1.5, "2"} {
		if code := c.code(t, VerbClaimNext, map[string]any{"max": max}); code != CodeInvalidArgument {
			t.Errorf("max %v: %s, want invalid_argument", max, code)
		}
	}
	if row := e.todo(a.ID); row.State != store.StatePending {
		t.Fatalf("a refused claim_next left todo %d %s", a.ID, row.State)
	}
	// Without max the answer is the one todo, as always, with no list.
	var one severalResult
	c.ok(t, VerbClaimNext, nil, &one)
	if !one.Claimed || one.Todo == nil || one.Todo.ID != a.ID || one.Claims != nil {
		t.Fatalf("claim_next without max = %+v", one)
	}
}
