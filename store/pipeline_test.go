package store

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// inOneBatch runs the writes at once and returns when each is answered, all of
// them in one batch of the writer, in the order given: it is held on an
// exclusive request until every write waits in its queue, each queued before
// the next is started.
func inOneBatch(t *testing.T, s *Store, writes ...func()) {
	t.Helper()
	gate := make(chan struct{})
	held := make(chan struct{})
	go s.exclusive(context.Background(), func(*sql.Conn) error {
		close(held)
		<-gate
		return nil
	})
	<-held
	var wg sync.WaitGroup
	for i, write := range writes {
		wg.Go(write)
		for len(s.writer.reqs) < i+1 {
			time.Sleep(time.Millisecond) // waiting for the write to queue, not for time to pass
		}
	}
	close(gate)
	wg.Wait()
}

// A batch of one-statement writes is committed in one round trip, and each
// write is answered as it would be alone: a lost lease is a conflict that
// changes nothing, beside a complete and a claim that commit.
func TestPipelinedBatchAnswersEachWrite(t *testing.T) {
	s := pgProcesses(t, testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))[0]
	ctx := context.Background()
	addTodos(t, s, "inbox", 3)
	queues := []string{"inbox"}
	a, _, err := s.ClaimNext(ctx, "agent:a", queues, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	b, _, err := s.ClaimNext(ctx, "agent:b", queues, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := s.WriterStats()
	var errA, errB, errC error
	var c Todo
	var claimed bool
	inOneBatch(t, s,
		func() {
			_, errA = s.Complete(ctx, Ack{ID: a.ID, Owner: "agent:a", LeaseSeq: a.LeaseSeq, Queues: queues}, "ok")
		},
		func() { _, errB = s.Complete(ctx, Ack{ID: b.ID, Owner: "agent:b", LeaseSeq: b.LeaseSeq + 1}, "stale") },
		func() { c, claimed, errC = s.ClaimNext(ctx, "agent:c", queues, time.Minute) },
	)
	if errA != nil || errC != nil || !claimed {
		t.Fatalf("complete = %v; claim = %v, %v", errA, claimed, errC)
	}
	if !errors.Is(errB, ErrConflict) || !strings.Contains(errB.Error(), "was lost") {
		t.Fatalf("complete under a lost lease = %v, want the conflict held gives", errB)
	}
	after := s.WriterStats()
	if after.Pipelined-before.Pipelined != 1 || after.Batches-before.Batches != 1 {
		t.Fatalf("%d batches, %d pipelined; want the three writes in one pipelined batch",
			after.Batches-before.Batches, after.Pipelined-before.Pipelined)
	}
	for id, want := range map[int64]string{a.ID: StateDone, b.ID: StateClaimed, c.ID: StateClaimed} {
		if got, err := s.Todo(ctx, id); err != nil || got.State != want {
			t.Errorf("todo %d is %s (%v), want %s", id, got.State, err, want)
		}
	}
	if done := auditDetails(t, s, "todo.complete"); len(done) != 1 {
		t.Errorf("%d todo.complete audit rows, want 1", len(done))
	}
}

// A statement that fails in a pipelined batch rolls the whole batch back; the
// batch runs again one write at a time, so the failing write alone gets its
// error and the others commit once.
func TestPipelinedBatchRunsAgainAfterAFailedStatement(t *testing.T) {
	s := pgProcesses(t, testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))[0]
	ctx := context.Background()
	addTodos(t, s, "inbox", 2)
	queues := []string{"inbox"}
	a, _, err := s.ClaimNext(ctx, "agent:a", queues, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	before := s.WriterStats()
	bad := &pgOne{query: `SELECT 1 / (count(*) - count(*)) FROM todos`,
		args: func(time.Time) []any { return nil },
		read: func(_ *wtx, row scanner) error { var n int; return row.Scan(&n) }}
	var errA, errBad, errC error
	var claimed bool
	inOneBatch(t, s,
		func() { _, errA = s.Complete(ctx, Ack{ID: a.ID, Owner: "agent:a", LeaseSeq: a.LeaseSeq}, "ok") },
		func() { errBad = s.writeOne(ctx, bad) },
		func() { _, claimed, errC = s.ClaimNext(ctx, "agent:c", queues, time.Minute) },
	)
	if errA != nil || errC != nil || !claimed {
		t.Fatalf("complete = %v; claim = %v, %v", errA, claimed, errC)
	}
	if errBad == nil || !strings.Contains(errBad.Error(), "division by zero") {
		t.Fatalf("the failing write = %v, want division by zero", errBad)
	}
	if after := s.WriterStats(); after.Pipelined != before.Pipelined {
		t.Fatalf("%d batches pipelined, want none committed that way", after.Pipelined-before.Pipelined)
	}
	if done := auditDetails(t, s, "todo.complete"); len(done) != 1 {
		t.Errorf("%d todo.complete audit rows, want 1", len(done))
	}
	if claims := auditDetails(t, s, "todo.claim_next"); len(claims) != 2 {
		t.Errorf("%d todo.claim_next audit rows, want 2", len(claims))
	}
}

// Fail on a todo with attempts left waits RetryBackoff(attempts), on both
// backends (PostgreSQL's statement carries the backoffs), and dead-letters the
// todo at its last attempt.
func TestFailBacksOffAsRetryBackoffSays(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	ctx := context.Background()
	const attempts = 11
	td, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "x", MaxAttempts: attempts})
	if err != nil {
		t.Fatal(err)
	}
	for n := 1; n <= attempts; n++ {
		got, err := s.Claim(ctx, Ack{ID: td.ID, Owner: "agent:a"}, time.Minute)
		if err != nil {
			t.Fatalf("claim %d: %v", n, err)
		}
		failed, err := s.Fail(ctx, Ack{ID: td.ID, Owner: "agent:a", LeaseSeq: got.LeaseSeq}, "boom", true)
		if err != nil {
			t.Fatalf("fail %d: %v", n, err)
		}
		if n == attempts {
			if failed.State != StateFailed || failed.FinishedAt == nil {
				t.Fatalf("the last fail left it %s (finished %v), want failed", failed.State, failed.FinishedAt)
			}
			break
		}
		if want := clock.Now().Add(RetryBackoff(n)); failed.State != StatePending || !failed.AvailableAt.Equal(want) {
			t.Fatalf("fail %d: %s until %v, want pending until %v", n, failed.State, failed.AvailableAt, want)
		}
		clock.Add(RetryBackoff(n))
	}
	if retries := auditDetails(t, s, "todo.fail"); len(retries) != attempts-1 {
		t.Errorf("%d todo.fail audit rows, want %d", len(retries), attempts-1)
	}
	if dead := auditDetails(t, s, "todo.dead_letter"); len(dead) != 1 || dead[0] != "boom" {
		t.Errorf("dead letters audited %q, want one saying boom", dead)
	}
}
