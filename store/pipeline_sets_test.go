package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// inOneSet runs writes of one kind in one batch of the writer and fails the
// test unless that batch was sent whole (pipeline.go) with the writes in one
// set-based statement, which no statement failure made run again.
func inOneSet(t *testing.T, s *Store, writes ...func()) {
	t.Helper()
	before := s.WriterStats()
	inOneBatch(t, s, writes...)
	after := s.WriterStats()
	if after.Pipelined-before.Pipelined != 1 || after.Batches-before.Batches != 1 ||
		after.InSets-before.InSets != int64(len(writes)) {
		t.Fatalf("%d batches, %d pipelined, %d writes in sets; want the %d writes in one pipelined set",
			after.Batches-before.Batches, after.Pipelined-before.Pipelined, after.InSets-before.InSets, len(writes))
	}
}

// auditCount counts the audit rows of action.
func auditCount(t *testing.T, s *Store, action string) int {
	t.Helper()
	var n int
	if err := s.rdb.QueryRow(s.q(`SELECT count(*) FROM audit WHERE action = ?`), action).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Completes in one batch go as one statement, and each ack gets the answer it
// would get alone: a stale lease_seq, a lapsed lease, a todo outside the
// caller's scope, a second ack of one todo and an unknown todo each fail alone,
// beside completes that commit, one of which frees its key's next todo.
func TestCompletesInOneStatementAnswerEachAck(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := pgProcesses(t, clock)[0]
	ctx := context.Background()
	keyed := make([]int64, 2)
	for i := range keyed {
		td, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "k", Options: TodoOptions{Key: "k1"}})
		if err != nil {
			t.Fatal(err)
		}
		keyed[i] = td.ID
	}
	addTodos(t, s, "inbox", 4)
	queues := []string{"inbox"}
	acks := map[string]Ack{}
	for _, who := range []string{"a", "b", "c", "d", "e"} {
		ttl := 10 * time.Minute
		if who == "c" {
			ttl = 10 * time.Second
		}
		owner := "agent:" + who
		td, ok, err := s.ClaimNext(ctx, owner, queues, ttl)
		if err != nil || !ok {
			t.Fatalf("claim for %s: %v, %v", who, ok, err)
		}
		acks[who] = Ack{ID: td.ID, Owner: owner, LeaseSeq: td.LeaseSeq, Queues: queues}
	}
	if acks["a"].ID != keyed[0] {
		t.Fatalf("agent:a claimed todo %d, want the key's front %d", acks["a"].ID, keyed[0])
	}
	clock.Add(time.Minute) // c's lease lapses
	stale, outside := acks["b"], acks["d"]
	stale.LeaseSeq++
	outside.Queues = []string{"elsewhere"}
	unknown := Ack{ID: 1 << 40, Owner: "agent:a", LeaseSeq: 1, Queues: queues}
	errs := make([]error, 7)
	acked := []Ack{acks["a"], stale, acks["c"], outside, acks["e"], acks["e"], unknown}
	var writes []func()
	for i, a := range acked {
		writes = append(writes, func() { _, errs[i] = s.Complete(ctx, a, "ok") })
	}
	inOneSet(t, s, writes...)
	if errs[0] != nil {
		t.Errorf("complete under a live lease = %v", errs[0])
	}
	wants := map[int]string{1: "was lost", 2: "lease expired", 6: "not found"}
	for i, want := range wants {
		if errs[i] == nil || !strings.Contains(errs[i].Error(), want) {
			t.Errorf("ack %d = %v, want an error saying %q", i, errs[i], want)
		}
	}
	if !errors.Is(errs[3], ErrNotFound) {
		t.Errorf("ack outside its scope = %v, want not found", errs[3])
	}
	if (errs[4] == nil) == (errs[5] == nil) || !errors.Is(errors.Join(errs[4], errs[5]), ErrConflict) {
		t.Errorf("one todo acked twice = %v and %v, want one done and one conflict", errs[4], errs[5])
	}
	for id, want := range map[int64]string{acks["a"].ID: StateDone, acks["b"].ID: StateClaimed,
		acks["c"].ID: StateClaimed, acks["d"].ID: StateClaimed, acks["e"].ID: StateDone} {
		if got, err := s.Todo(ctx, id); err != nil || got.State != want {
			t.Errorf("todo %d is %s (%v), want %s", id, got.State, err, want)
		}
	}
	if next, err := s.Todo(ctx, keyed[1]); err != nil || next.KeyWaiting {
		t.Errorf("the key's next todo still waits (%v) after its front was completed", err)
	}
	if n := auditCount(t, s, "todo.complete"); n != 2 {
		t.Errorf("%d complete audit rows, want 2", n)
	}
	// Other processes hear of the key's next todo by this row (see keyFreed).
	if n := auditCount(t, s, "todo.key_free"); n != 1 {
		t.Errorf("%d key_free audit rows, want 1", n)
	}
	countsAgree(t, s)
}

// Claims on one queue in one batch go as one statement: each claim gets its own
// todo, a worker's reserved todo goes to that worker, and a claim beyond what is
// claimable gets nothing; on a paused queue no claim gets anything.
func TestClaimsInOneStatementEachGetTheirOwn(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := pgProcesses(t, clock)[0]
	ctx := context.Background()
	ids := addTodos(t, s, "inbox", 5)
	queues := []string{"inbox"}
	// Two todos reserved for agent:r after a human's decision.
	var held []Ack
	for _, want := range ids[:2] {
		td, _, err := s.ClaimNext(ctx, "agent:r", queues, time.Minute)
		if err != nil || td.ID != want {
			t.Fatalf("claim = %d, %v; want %d", td.ID, err, want)
		}
		held = append(held, Ack{ID: td.ID, Owner: "agent:r", LeaseSeq: td.LeaseSeq, Queues: queues})
	}
	for _, ack := range held {
		if _, err := s.RequestApproval(ctx, ack, "ship it?"); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Decide(ctx, ack.ID, true, "yes", "human:1"); err != nil {
			t.Fatal(err)
		}
	}
	owners := []string{"agent:x", "agent:y", "agent:r", "agent:r", "agent:z", "agent:w"}
	got := make([]Todo, len(owners))
	oks := make([]bool, len(owners))
	errs := make([]error, len(owners))
	var writes []func()
	for i, o := range owners {
		writes = append(writes, func() { got[i], oks[i], errs[i] = s.ClaimNext(ctx, o, queues, time.Minute) })
	}
	inOneSet(t, s, writes...)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	// The writes reach the writer in no set order: the reserved todos go to
	// agent:r's two claims, the three others to three of the other four claims,
	// and one finds nothing.
	claimedBy := map[int64]string{}
	for i, o := range owners {
		if !oks[i] {
			continue
		}
		if prev, twice := claimedBy[got[i].ID]; twice {
			t.Errorf("todo %d claimed by %s and %s", got[i].ID, prev, o)
		}
		claimedBy[got[i].ID] = o
		if got[i].Owner != o || got[i].State != StateClaimed || got[i].Payload == "" ||
			!got[i].LeaseExpiry.Equal(clock.Now().Truncate(time.Millisecond).Add(time.Minute)) {
			t.Errorf("claim %d by %s = %+v", i, o, got[i])
		}
	}
	if len(claimedBy) != 5 || claimedBy[ids[0]] != "agent:r" || claimedBy[ids[1]] != "agent:r" {
		t.Errorf("claimed %v; want the five todos claimed, %d and %d by agent:r", claimedBy, ids[0], ids[1])
	}
	if n := auditCount(t, s, "todo.claim_next"); n != 7 {
		t.Errorf("%d claim audit rows, want 7 (two before, five in the batch)", n)
	}
	countsAgree(t, s)

	addTodos(t, s, "inbox", 2)
	if err := s.PauseQueue(ctx, "inbox", "human:1"); err != nil {
		t.Fatal(err)
	}
	writes = writes[:2]
	inOneSet(t, s, writes...)
	if oks[0] || oks[1] || errs[0] != nil || errs[1] != nil {
		t.Errorf("claims on a paused queue = %v %v, %v %v; want nothing", oks[0], errs[0], oks[1], errs[1])
	}
}
