package store

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// claimOne claims the head of queues for owner and returns its ack.
func claimOne(t *testing.T, s *Store, owner string, queues []string) Ack {
	t.Helper()
	td, ok, err := s.ClaimNext(context.Background(), owner, queues, time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim for %s: %v, %v", owner, ok, err)
	}
	return Ack{ID: td.ID, Owner: owner, LeaseSeq: td.LeaseSeq, Queues: queues}
}

// A complete with the claim of the next todo is one commit: the todo is done,
// the next one claimed by the same owner, both audited.
func TestCompleteThenClaimIsOneCommit(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	ids := addTodos(t, s, "inbox", 3)
	queues := []string{"inbox"}
	ack := claimOne(t, s, "agent:a", queues)
	before := s.WriterStats()
	done, next, err := s.CompleteThenClaim(ctx, ack, "ok", queues, time.Minute)
	if err != nil || next.Err != nil {
		t.Fatalf("complete then claim: %v, %v", err, next.Err)
	}
	after := s.WriterStats()
	if after.Batches-before.Batches != 1 || after.Requests-before.Requests != 2 {
		t.Errorf("%d batches for %d writes; want the complete and the claim in one", after.Batches-before.Batches,
			after.Requests-before.Requests)
	}
	if done.ID != ids[0] || done.State != StateDone || done.Result != "ok" {
		t.Errorf("completed %+v, want todo %d done", done, ids[0])
	}
	if !next.OK || next.Todo.ID != ids[1] || next.Todo.Owner != "agent:a" || next.Todo.State != StateClaimed {
		t.Errorf("next = %+v, want todo %d claimed by agent:a", next, ids[1])
	}
	if n := auditCount(t, s, "todo.complete"); n != 1 {
		t.Errorf("%d complete audit rows, want 1", n)
	}
	if n := auditCount(t, s, "todo.claim_next"); n != 2 {
		t.Errorf("%d claim audit rows, want 2", n)
	}
	// The queue's last todo, then nothing left: the complete stands.
	ack = Ack{ID: next.Todo.ID, Owner: "agent:a", LeaseSeq: next.Todo.LeaseSeq, Queues: queues}
	if _, next, err = s.CompleteThenClaim(ctx, ack, "", queues, time.Minute); err != nil || !next.OK {
		t.Fatalf("second: %v, %+v", err, next)
	}
	ack = Ack{ID: next.Todo.ID, Owner: "agent:a", LeaseSeq: next.Todo.LeaseSeq, Queues: queues}
	if done, next, err = s.CompleteThenClaim(ctx, ack, "", queues, time.Minute); err != nil || next.OK || next.Err != nil ||
		done.State != StateDone {
		t.Fatalf("last = %+v, %+v, %v; want done and nothing claimed", done, next, err)
	}
	countsAgree(t, s)
}

// A complete that fails (a stale lease_seq, a lapsed lease) claims nothing: the
// worker gets the complete's error and holds no new todo.
func TestThenClaimAfterAFailedCompleteClaimsNothing(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	ctx := context.Background()
	addTodos(t, s, "inbox", 4)
	queues := []string{"inbox"}
	stale := claimOne(t, s, "agent:a", queues)
	stale.LeaseSeq++
	if _, next, err := s.CompleteThenClaim(ctx, stale, "", queues, time.Minute); !errors.Is(err, ErrConflict) || next.OK {
		t.Errorf("stale ack = %v, %+v; want a conflict and nothing claimed", err, next)
	}
	lapsed, _, err := s.ClaimNext(ctx, "agent:b", queues, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Minute)
	ack := Ack{ID: lapsed.ID, Owner: "agent:b", LeaseSeq: lapsed.LeaseSeq, Queues: queues}
	if _, next, err := s.FailThenClaim(ctx, ack, "boom", true, queues, time.Minute); err == nil || next.OK {
		t.Errorf("lapsed ack = %v, %+v; want an error and nothing claimed", err, next)
	}
	for _, owner := range []string{"agent:a", "agent:b"} {
		if n := claimedBy(t, s, owner); n != 1 {
			t.Errorf("%s holds %d claimed todos, want only the one it acked", owner, n)
		}
	}
	countsAgree(t, s)
}

// A failed todo with retry waits out its backoff: the claim after it takes the
// next todo, not the one just failed.
func TestFailThenClaimTakesAnotherTodo(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	ids := addTodos(t, s, "inbox", 2)
	queues := []string{"inbox"}
	ack := claimOne(t, s, "agent:a", queues)
	failed, next, err := s.FailThenClaim(ctx, ack, "boom", true, queues, time.Minute)
	if err != nil || next.Err != nil {
		t.Fatal(err, next.Err)
	}
	if failed.State != StatePending || !next.OK || next.Todo.ID != ids[1] {
		t.Errorf("failed %+v, next %+v; want todo %d back in its backoff and %d claimed", failed, next, ids[0], ids[1])
	}
}

// The claim runs after the complete: completing a key's front frees the key's
// next todo, and the claim in the same commit can take it.
func TestThenClaimSeesTheKeyItFreed(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	ids := addKeyedTodos(t, s, "inbox", "k1", 2)
	queues := []string{"inbox"}
	ack := claimOne(t, s, "agent:a", queues)
	_, next, err := s.CompleteThenClaim(ctx, ack, "", queues, time.Minute)
	if err != nil || next.Err != nil {
		t.Fatal(err, next.Err)
	}
	if !next.OK || next.Todo.ID != ids[1] {
		t.Errorf("next = %+v, want the key's next todo %d", next, ids[1])
	}
}

// Pipelined on PostgreSQL, with other workers' claims and completes in the same
// batch: each claim after a complete (or fail) that was made gets its own todo,
// even when a later pair's fail is a statement of its own, and each after an
// ack that failed gets none (a stale lease_seq; a second complete of a todo
// done before, whose lease_seq still matches), in one round trip.
func TestThenClaimsInOnePipelinedBatch(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := pgProcesses(t, clock)[0]
	ctx := context.Background()
	addTodos(t, s, "inbox", 12)
	queues := []string{"inbox"}
	owners := []string{"agent:a", "agent:b", "agent:c", "agent:d", "agent:f"}
	acks := make([]Ack, len(owners))
	for i, o := range owners {
		acks[i] = claimOne(t, s, o, queues)
	}
	acks[1].LeaseSeq++ // b's complete fails
	if _, err := s.Complete(ctx, acks[4], ""); err != nil {
		t.Fatal(err) // f's complete in the batch is its second
	}
	plain := claimOne(t, s, "agent:e", queues)
	type outcome struct {
		next Next
		err  error
	}
	got := make([]outcome, len(owners))
	var claimE Todo
	var errE, errPlain error
	pair := func(i int) func() {
		return func() {
			if owners[i] == "agent:d" {
				_, got[i].next, got[i].err = s.FailThenClaim(ctx, acks[i], "boom", true, queues, time.Minute)
				return
			}
			_, got[i].next, got[i].err = s.CompleteThenClaim(ctx, acks[i], "", queues, time.Minute)
		}
	}
	writes := []func(){
		pair(0), pair(3),
		func() { claimE, _, errE = s.ClaimNext(ctx, "agent:e", queues, time.Minute) },
		func() { _, errPlain = s.Complete(ctx, plain, "") },
		pair(1), pair(2), pair(4),
	}
	before := s.WriterStats()
	inOneBatch(t, s, writes...)
	after := s.WriterStats()
	if after.Batches-before.Batches != 1 || after.Pipelined-before.Pipelined != 1 {
		t.Fatalf("%d batches, %d pipelined; want one pipelined batch", after.Batches-before.Batches,
			after.Pipelined-before.Pipelined)
	}
	if errE != nil || errPlain != nil || claimE.ID == 0 {
		t.Fatalf("the plain claim and complete: %v, %v", errE, errPlain)
	}
	seen := map[int64]string{claimE.ID: "agent:e"}
	for i, o := range owners {
		g := got[i]
		if o == "agent:b" || o == "agent:f" {
			if !errors.Is(g.err, ErrConflict) || g.next.OK {
				t.Errorf("%s after a failed ack: %v, %+v; want a conflict and nothing claimed", o, g.err, g.next)
			}
			continue
		}
		if g.err != nil || g.next.Err != nil || !g.next.OK || g.next.Todo.Owner != o {
			t.Errorf("%s: %v, %+v; want its next todo claimed", o, g.err, g.next)
			continue
		}
		if prev, twice := seen[g.next.Todo.ID]; twice {
			t.Errorf("todo %d claimed by %s and %s", g.next.Todo.ID, prev, o)
		}
		seen[g.next.Todo.ID] = o
	}
	for owner, want := range map[string]int{"agent:b": 1, "agent:f": 0} {
		if held := claimedBy(t, s, owner); held != want {
			t.Errorf("%s holds %d todos, want %d", owner, held, want)
		}
	}
	countsAgree(t, s)
}

// Beside a write that cannot be pipelined, a batch on PostgreSQL runs each write
// under a savepoint: the claim after a complete still claims (its statement's
// check of the complete holds under a savepoint too).
func TestThenClaimUnderSavepoints(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	ids := addTodos(t, s, "inbox", 3)
	queues := []string{"inbox"}
	ack := claimOne(t, s, "agent:a", queues)
	var next Next
	var errPair, errAdd error
	before := s.WriterStats()
	inOneBatch(t, s,
		func() { _, errAdd = s.AddTodo(ctx, NewTodo{Queue: "other", Payload: "x"}) },
		func() { _, next, errPair = s.CompleteThenClaim(ctx, ack, "", queues, time.Minute) })
	after := s.WriterStats()
	if after.Batches-before.Batches != 1 || after.Pipelined != before.Pipelined {
		t.Fatalf("%d batches, %d pipelined; want one batch, not pipelined", after.Batches-before.Batches,
			after.Pipelined-before.Pipelined)
	}
	if errAdd != nil || errPair != nil || next.Err != nil || !next.OK || next.Todo.ID != ids[1] {
		t.Errorf("add %v; complete then claim %v, %+v; want todo %d claimed", errAdd, errPair, next, ids[1])
	}
}

// Two acks of one todo in one batch (a worker's complete sent twice, or a fail
// beside it): one of them is made, and only its claim runs; the other's claim
// claims nothing, though the todo it acked was changed in this transaction with
// the lease it named (by the other ack). Pipelined on PostgreSQL.
func TestThenClaimAfterAnAckMadeByAnotherWriteClaimsNothing(t *testing.T) {
	for _, second := range []string{"complete", "fail"} {
		t.Run(second, func(t *testing.T) {
			s := openTest(t, Options{})
			ctx := context.Background()
			addTodos(t, s, "inbox", 4)
			queues := []string{"inbox"}
			ack := claimOne(t, s, "agent:a", queues)
			var nexts [2]Next
			var errs [2]error
			pair := func(i int) func() {
				return func() {
					if i == 1 && second == "fail" {
						_, nexts[i], errs[i] = s.FailThenClaim(ctx, ack, "boom", true, queues, time.Minute)
						return
					}
					_, nexts[i], errs[i] = s.CompleteThenClaim(ctx, ack, "", queues, time.Minute)
				}
			}
			inOneBatch(t, s, pair(0), pair(1))
			made := 0
			for i := range 2 {
				switch {
				case errs[i] == nil && nexts[i].OK && nexts[i].Err == nil:
					made++
				case errors.Is(errs[i], ErrConflict) && !nexts[i].OK:
				default:
					t.Errorf("pair %d: %v, %+v; want its ack and claim made, or a conflict and nothing claimed", i, errs[i], nexts[i])
				}
			}
			if held := claimedBy(t, s, "agent:a"); made != 1 || held != 1 {
				t.Errorf("%d pairs made, agent:a holds %d todos; want one pair made and its one claim", made, held)
			}
			countsAgree(t, s)
		})
	}
}

// claimedBy counts the todos owner holds claimed.
func claimedBy(t *testing.T, s *Store, owner string) int {
	t.Helper()
	var n int
	if err := s.rdb.QueryRow(s.q(`SELECT count(*) FROM todos WHERE owner = ? AND state = 'claimed'`), owner).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A follow-up claim (CompleteThenClaim) whose complete was refused claims
// nothing, even when a complete of the key's front in the same pipelined batch
// wrote the acked todo as it freed it (pgKeyNext sets key_waiting = 0): the row
// is this transaction's and not claimed, yet the ack changed nothing
// (pgClaimAfter). Claimed, the todo would be held by a worker never told of it
// until its lease ran out, and with it its whole key.
//
// Sequence: A (key k) claimed by agent:a, dead-lettered; B (key k) added, the
// front; A retried, waits behind B; agent:b claims B. In one batch: agent:b
// completes B, and agent:a sends CompleteThenClaim for A with its old lease.
// Runs on PostgreSQL (SQLite checks the lead in Go before the claim).
func TestThenClaimAfterARefusedAckOfAFreedTodoClaimsNothing(t *testing.T) {
	s := pgProcesses(t, testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))[0]
	ctx := context.Background()
	queues := []string{"prs"}
	a, err := s.AddTodo(ctx, NewTodo{Queue: "prs", Payload: "a", Options: TodoOptions{Key: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	ackA := claimOne(t, s, "agent:a", queues)
	if ackA.ID != a.ID {
		t.Fatalf("claimed %d, want %d", ackA.ID, a.ID)
	}
	if _, err := s.Fail(ctx, ackA, "boom", false); err != nil { // dead letter
		t.Fatal(err)
	}
	b, err := s.AddTodo(ctx, NewTodo{Queue: "prs", Payload: "b", Options: TodoOptions{Key: "k"}})
	if err != nil || b.KeyWaiting {
		t.Fatalf("add b = %+v, %v; want the key's front", b, err)
	}
	if re, err := s.Retry(ctx, a.ID, "human:ops"); err != nil || !re.KeyWaiting {
		t.Fatalf("retry a = %+v, %v; want it waiting behind b", re, err)
	}
	ackB := claimOne(t, s, "agent:b", queues)
	if ackB.ID != b.ID {
		t.Fatalf("claimed %d, want %d", ackB.ID, b.ID)
	}

	var errB, errA error
	var next Next
	inOneBatch(t, s,
		func() { _, errB = s.Complete(ctx, ackB, "ok") },
		func() { _, next, errA = s.CompleteThenClaim(ctx, ackA, "late", queues, time.Minute) },
	)
	if errB != nil {
		t.Fatalf("complete b: %v", errB)
	}
	if !errors.Is(errA, ErrConflict) {
		t.Fatalf("agent:a's stale complete: %v, want a conflict", errA)
	}
	if next.OK {
		t.Fatalf("agent:a's refused complete came with a claim: %+v", next)
	}
	if held := claimedBy(t, s, "agent:a"); held != 0 {
		cur, _ := s.Todo(ctx, a.ID)
		t.Fatalf("agent:a's complete was refused (%v), yet agent:a now holds %d todo(s) it was never told of "+
			"(todo %d: state %s, owner %s, lease_seq %d)", errA, held, cur.ID, cur.State, cur.Owner, cur.LeaseSeq)
	}
	countsAgree(t, s)
}
