package agent

import (
	"slices"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/reaper"
	"github.com/switchboardhq/switchboard/store"
)

// afterResult is complete's and fail's answer with claim_next=true.
type afterResult struct {
	Todo store.Todo   `json:"todo"`
	Next *claimResult `json:"next"`
}

// One call a todo: complete (and fail) with claim_next=true store the todo named,
// then claim the next one, whose lease the session remembers like claim_next's;
// with nothing left, next says so.
func TestCompleteAndFailClaimNext(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("loop", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	a, b, d := e.addTodo("inbox", `{"n":1}`), e.addTodo("inbox", `{"n":2}`), e.addTodo("inbox", `{"n":3}`)
	var first claimResult
	c.ok(t, VerbClaimNext, nil, &first)

	var got afterResult
	c.ok(t, VerbComplete, map[string]any{"todo_id": a.ID, "lease_seq": first.LeaseSeq, "claim_next": true}, &got)
	if got.Todo.ID != a.ID || e.todo(a.ID).State != store.StateDone {
		t.Fatalf("complete answered todo %d; todo %d is %s", got.Todo.ID, a.ID, e.todo(a.ID).State)
	}
	n := got.Next
	if n == nil || !n.Claimed || n.Todo == nil || n.Todo.ID != b.ID || n.Todo.Payload != `{"n":2}` || n.LeaseSeq < 1 {
		t.Fatalf("next = %+v, want todo %d claimed with its payload and lease_seq", n, b.ID)
	}
	if row := e.todo(b.ID); row.State != store.StateClaimed || row.LeaseSeq != n.LeaseSeq ||
		!row.LeaseExpiry.Equal(e.clock.Now().Add(DefaultLeaseSeconds*time.Second)) {
		t.Fatalf("todo %d is %+v after the combined call", b.ID, row)
	}

	// The session remembers the next lease: fail acts on it without lease_seq.
	var failed afterResult
	c.ok(t, VerbFail, map[string]any{"todo_id": b.ID, "error": "broke", "claim_next": true}, &failed)
	if failed.Next == nil || !failed.Next.Claimed || failed.Next.Todo.ID != d.ID {
		t.Fatalf("fail's next = %+v, want todo %d", failed.Next, d.ID)
	}
	// b went back to pending after a backoff, so the last complete finds nothing
	// claimable now, and says so rather than failing.
	var last afterResult
	c.ok(t, VerbComplete, map[string]any{"todo_id": d.ID, "lease_seq": failed.Next.LeaseSeq, "claim_next": true}, &last)
	if last.Next == nil || last.Next.Claimed || last.Next.Message == "" {
		t.Fatalf("next with nothing claimable = %+v", last.Next)
	}
	// Without the option the answer has no next.
	var plain afterResult
	e.clock.Add(time.Hour)
	c.ok(t, VerbClaimNext, nil, &first)
	c.ok(t, VerbComplete, map[string]any{"todo_id": b.ID}, &plain)
	if plain.Next != nil {
		t.Fatalf("complete without claim_next answered next %+v", plain.Next)
	}
}

// A complete or fail that is refused (lapsed lease, stale lease_seq, no claim_next
// in scope) claims nothing and changes nothing; and the todo the option claimed is
// fenced like any claim: once its lease lapses and another worker claims it, the
// first worker's complete, with or without claim_next, is a conflict.
func TestClaimNextAfterRefusedAckTouchesNothing(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("pool", []string{"inbox"}, nil)
	first, second := e.dial(cred, false), e.dial(cred, false)
	a, b := e.addTodo("inbox", "a"), e.addTodo("inbox", "b")
	var claim claimResult
	first.ok(t, VerbClaim, map[string]any{"todo_id": a.ID, "lease_ttl_seconds": 60}, &claim)
	e.clock.Add(61 * time.Second)
	for _, verb := range []string{VerbComplete, VerbFail} {
		args := map[string]any{"todo_id": a.ID, "lease_seq": claim.LeaseSeq, "claim_next": true}
		if verb == VerbFail {
			args["error"] = "late"
		}
		if code := first.code(t, verb, args); code != CodeConflict {
			t.Errorf("%s claim_next=true on a lapsed lease: %s, want conflict", verb, code)
		}
		if row := e.todo(b.ID); row.State != store.StatePending || row.LeaseSeq != 0 {
			t.Fatalf("after a refused %s, todo %d is %s with lease_seq %d: something was claimed", verb, b.ID, row.State, row.LeaseSeq)
		}
	}

	// The reaper requeues a; the todo the option claims next lapses and goes to
	// another worker.
	requeue(t, e)
	var again claimResult
	second.ok(t, VerbClaimNext, nil, &again)
	if again.Todo == nil || again.Todo.ID != a.ID {
		t.Fatalf("second claimed %+v, want todo %d", again.Todo, a.ID)
	}
	var got afterResult
	second.ok(t, VerbComplete, map[string]any{"todo_id": a.ID, "lease_seq": again.LeaseSeq, "claim_next": true}, &got)
	if got.Next == nil || got.Next.Todo == nil || got.Next.Todo.ID != b.ID {
		t.Fatalf("next = %+v, want todo %d", got.Next, b.ID)
	}
	e.clock.Add((DefaultLeaseSeconds + 1) * time.Second)
	requeue(t, e)
	var stolen claimResult
	first.ok(t, VerbClaimNext, nil, &stolen)
	if stolen.Todo == nil || stolen.Todo.ID != b.ID || stolen.LeaseSeq <= got.Next.LeaseSeq {
		t.Fatalf("first claimed %+v after the lapse, want todo %d under a newer lease", stolen, b.ID)
	}
	for _, args := range []map[string]any{
		{"todo_id": b.ID, "lease_seq": got.Next.LeaseSeq, "claim_next": true},
		{"todo_id": b.ID, "claim_next": true}, // the session's remembered, lost lease
	} {
		if code := second.code(t, VerbComplete, args); code != CodeConflict {
			t.Errorf("complete %v on the lost next lease: %s, want conflict", args, code)
		}
	}
	if row := e.todo(b.ID); row.State != store.StateClaimed || row.LeaseSeq != stolen.LeaseSeq {
		t.Fatalf("todo %d is %s under lease %d, want still the first worker's %d", b.ID, row.State, row.LeaseSeq, stolen.LeaseSeq)
	}
}

// An endpoint that may complete but not claim_next is refused the option before
// the todo is touched: the todo stays claimed, and the refusal says why.
func TestClaimNextOptionNeedsTheVerb(t *testing.T) {
	e := newEnv(t)
	verbs := slices.DeleteFunc(store.AllVerbs(), func(v string) bool { return v == VerbClaimNext })
	_, cred := e.endpoint("narrow", []string{"inbox"}, verbs)
	c := e.dial(cred, false)
	a := e.addTodo("inbox", "a")
	e.addTodo("inbox", "b")
	var claim claimResult
	c.ok(t, VerbClaim, map[string]any{"todo_id": a.ID}, &claim)
	if code := c.code(t, VerbComplete, map[string]any{"todo_id": a.ID, "claim_next": true}); code != CodeForbidden {
		t.Fatalf("complete claim_next=true without the claim_next verb: %s, want forbidden", code)
	}
	if row := e.todo(a.ID); row.State != store.StateClaimed {
		t.Fatalf("the refused complete left todo %d %s", a.ID, row.State)
	}
	c.ok(t, VerbComplete, map[string]any{"todo_id": a.ID}, nil)
}

// requeue runs one reaper pass, which must requeue exactly one lapsed todo.
func requeue(t *testing.T, e *env) {
	t.Helper()
	res, err := reaper.New(e.st, reaper.Options{Logger: e.quiet}).RunOnce(t.Context())
	if err != nil || res.Requeued != 1 {
		t.Fatalf("reaper pass = %+v, %v; want 1 requeued", res, err)
	}
}
