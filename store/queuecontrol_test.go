package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// A human cancels a claimed todo: it ends failed, marked cancelled (not a dead
// letter: RetryFailed passes it by), and its worker's next acknowledgements
// answer conflict saying it was cancelled. A second cancel changes nothing.
func TestCancelEndsATodoItsWorkerHearsWhy(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	ids := addTodos(t, s, "inbox", 2)
	held, err := s.Claim(ctx, Ack{ID: ids[0], Owner: "agent:w"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		td, err := s.CancelTodo(ctx, id, "human:alice")
		if err != nil {
			t.Fatalf("cancel %d: %v", id, err)
		}
		if td.State != StateFailed || td.CancelledBy != "human:alice" || td.Owner != "" || td.LeaseExpiry != nil {
			t.Fatalf("cancelled todo = %+v", td)
		}
	}
	a := Ack{ID: ids[0], Owner: "agent:w", LeaseSeq: held.LeaseSeq}
	acts := map[string]func() error{
		"heartbeat": func() error { _, err := s.Heartbeat(ctx, a, time.Minute); return err },
		"complete":  func() error { _, err := s.Complete(ctx, a, "done"); return err },
		"fail":      func() error { _, err := s.Fail(ctx, a, "oops", true); return err },
		"release":   func() error { _, err := s.Release(ctx, a); return err },
	}
	for verb, act := range acts {
		if err := act(); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "cancelled by human:alice") {
			t.Errorf("%s after cancel: %v, want a conflict saying it was cancelled", verb, err)
		}
	}
	before, _ := s.Todo(ctx, ids[0])
	if _, err := s.CancelTodo(ctx, ids[0], "human:bob"); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "cancelled by human:alice") {
		t.Fatalf("second cancel: %v, want conflict", err)
	}
	if after, _ := s.Todo(ctx, ids[0]); after.CancelledBy != "human:alice" || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("the second cancel changed the todo: %+v", after)
	}
	if n, err := s.RetryFailed(ctx, Failed{}, "human:alice"); err != nil || n != 0 {
		t.Fatalf("retry every dead letter = %d, %v; want the cancelled todos left alone", n, err)
	}
	if _, _, err := s.ClaimNext(ctx, "agent:w", []string{"inbox"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if td, err := s.Retry(ctx, ids[1], "human:alice"); err != nil || td.State != StatePending || td.CancelledBy != "" {
		t.Fatalf("a human's retry of a cancelled todo = %+v, %v", td, err)
	}
	done, _ := s.Claim(ctx, Ack{ID: ids[0]}, time.Minute)
	if done.ID != 0 {
		t.Fatalf("a cancelled todo was claimed: %+v", done)
	}
	if _, err := s.CancelTodo(ctx, 999, "human:alice"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cancel of no todo: %v", err)
	}
}

// A paused queue's todos are not claimable, by claim_next or by id; adds still
// land; resume makes them claimable again and rings the doorbell.
func TestPausedQueueIsNotClaimable(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	var rings []TodoChange
	s.OnTodoChange(func(c TodoChange) {
		if c.Cause == "resume" {
			rings = append(rings, c)
		}
	})
	ids := addTodos(t, s, "slow", 1)
	addTodos(t, s, "fast", 1)
	if err := s.PauseQueue(ctx, "slow", "human:alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.PauseQueue(ctx, "slow", "human:bob"); !errors.Is(err, ErrConflict) {
		t.Fatalf("second pause: %v, want conflict", err)
	}
	if err := s.PauseQueue(ctx, "no spaces", "human:bob"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("pause of a bad name: %v, want invalid", err)
	}
	more := addTodos(t, s, "slow", 1)
	td, ok, err := s.ClaimNext(ctx, "agent:w", []string{"fast", "slow"}, time.Minute)
	if err != nil || !ok || td.Queue != "fast" {
		t.Fatalf("claim next = %+v, %v, %v; want the other queue's todo", td, ok, err)
	}
	if _, ok, err := s.ClaimNext(ctx, "agent:w", []string{"slow", "fast"}, time.Minute); ok || err != nil {
		t.Fatalf("claim next on the paused queue = %v, %v; want nothing", ok, err)
	}
	if _, err := s.Claim(ctx, Ack{ID: ids[0], Owner: "agent:w"}, time.Minute); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("claim by id on a paused queue: %v", err)
	}
	rows, err := s.ListTodos(ctx, TodoFilter{Queues: []string{"slow"}})
	if err != nil || len(rows) != 2 || rows[0].Waiting != WaitingPaused {
		t.Fatalf("listing of the paused queue = %+v, %v; want its rows waiting: paused", rows, err)
	}
	paused, err := s.PausedQueues(ctx)
	if err != nil || len(paused) != 1 || paused[0].Queue != "slow" || paused[0].PausedBy != "human:alice" {
		t.Fatalf("paused queues = %+v, %v", paused, err)
	}
	if err := s.ResumeQueue(ctx, "slow", "human:alice"); err != nil {
		t.Fatal(err)
	}
	if err := s.ResumeQueue(ctx, "slow", "human:alice"); !errors.Is(err, ErrConflict) {
		t.Fatalf("resume of a running queue: %v, want conflict", err)
	}
	if len(rings) != 1 || rings[0].ID != ids[0] || !rings[0].Claimable {
		t.Fatalf("resume rang %+v; want the head %d, claimable", rings, ids[0])
	}
	td, ok, err = s.ClaimNext(ctx, "agent:w", []string{"slow"}, time.Minute)
	if err != nil || !ok || td.ID != ids[0] {
		t.Fatalf("claim next after resume = %+v, %v, %v", td, ok, err)
	}
	_ = more
}

// The human gate: a worker asks, its lease stops (the reaper passes it by, no one
// else claims it, its acks answer that it waits), a human decides once, and the
// worker that asked claims it first, with the answer.
func TestApprovalGate(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	ctx := context.Background()
	id := addTodos(t, s, "deploy", 1)[0]
	td, err := s.Claim(ctx, Ack{ID: id, Owner: "agent:w"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	stale := Ack{ID: id, Owner: "agent:w", LeaseSeq: td.LeaseSeq - 1}
	if _, err := s.RequestApproval(ctx, stale, "ship it?"); !errors.Is(err, ErrConflict) {
		t.Fatalf("request approval under a stale lease: %v, want conflict", err)
	}
	a := Ack{ID: id, Owner: "agent:w", LeaseSeq: td.LeaseSeq}
	if _, err := s.RequestApproval(ctx, a, ""); !errors.Is(err, ErrInvalid) {
		t.Fatalf("an empty question: %v, want invalid", err)
	}
	if _, err := s.Decide(ctx, id, true, "", "human:alice"); !errors.Is(err, ErrConflict) {
		t.Fatalf("a decision nobody asked for: %v, want conflict", err)
	}
	asked, err := s.RequestApproval(ctx, a, "Drop table users?")
	if err != nil || asked.Waiting != WaitingApproval || asked.LeaseExpiry != nil || asked.Approval.Question != "Drop table users?" {
		t.Fatalf("request approval = %+v, %v", asked, err)
	}
	clock.Add(time.Hour)
	if r, err := s.ReapExpired(ctx); err != nil || r.Requeued+r.DeadLettered != 0 {
		t.Fatalf("reap = %+v, %v; want the waiting todo left alone", r, err)
	}
	if _, ok, _ := s.ClaimNext(ctx, "agent:other", []string{"deploy"}, time.Minute); ok {
		t.Fatal("another worker claimed a todo awaiting approval")
	}
	if _, err := s.Heartbeat(ctx, a, time.Minute); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "awaiting") {
		t.Fatalf("heartbeat while waiting: %v", err)
	}
	waits, err := s.QueueWaits(ctx)
	if err != nil || waits["deploy"] != 1 {
		t.Fatalf("waits = %v, %v", waits, err)
	}
	list, err := s.AwaitingApproval(ctx, 10)
	if err != nil || len(list) != 1 || list[0].ID != id {
		t.Fatalf("awaiting approval = %+v, %v", list, err)
	}
	if _, err := s.Decide(ctx, id, false, "no: the backup is old", "human:alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, id, true, "yes", "human:bob"); !errors.Is(err, ErrConflict) {
		t.Fatalf("a second decision: %v, want conflict", err)
	}
	if _, ok, _ := s.ClaimNext(ctx, "agent:other", []string{"deploy"}, time.Minute); ok {
		t.Fatal("another worker claimed the answered todo before the one that asked")
	}
	if _, err := s.Claim(ctx, Ack{ID: id, Owner: "agent:other"}, time.Minute); !errors.Is(err, ErrConflict) {
		t.Fatalf("another worker's claim by id during the hold: %v", err)
	}
	again, ok, err := s.ClaimNext(ctx, "agent:w", []string{"deploy"}, time.Minute)
	if err != nil || !ok || again.ID != id || again.Approval == nil || again.Approval.State != ApprovalDenied ||
		again.Approval.Comment != "no: the backup is old" || again.Approval.By != "human:alice" || again.Attempts != 1 {
		t.Fatalf("the asker's claim = %+v (%+v), %v, %v", again, again.Approval, ok, err)
	}
	if _, err := s.Complete(ctx, Ack{ID: id, Owner: "agent:w", LeaseSeq: again.LeaseSeq}, "skipped"); err != nil {
		t.Fatal(err)
	}
}

// A todo released while awaiting approval (by a human, or by its endpoint's
// revocation) goes back without its question: the next worker's claim and the
// board showed approval "asked", a question no one could answer any more. An
// answer given before a release stays.
func TestAReleaseWithdrawsAnUnansweredQuestion(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	ep, _, err := s.CreateEndpoint(ctx, "w", EndpointSpec{Queues: &[]string{"deploy"}}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	ids := addTodos(t, s, "deploy", 3)
	ask := func(id int64) {
		t.Helper()
		td, err := s.Claim(ctx, Ack{ID: id, Owner: "agent:w"}, time.Minute)
		if err == nil {
			_, err = s.RequestApproval(ctx, Ack{ID: id, Owner: "agent:w", LeaseSeq: td.LeaseSeq}, "ship it?")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	ask(ids[0])
	if released, err := s.ReleaseByHuman(ctx, ids[0], "human:1"); err != nil || released.Approval != nil {
		t.Fatalf("release of a todo awaiting approval: approval %+v (%v), want none", released.Approval, err)
	}
	ask(ids[1])
	if err := s.RevokeEndpoint(ctx, ep.ID, "human:1"); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids[:2] {
		got, ok, err := s.ClaimNext(ctx, "agent:next", []string{"deploy"}, time.Minute)
		if err != nil || !ok || got.ID != id || got.Approval != nil || got.Waiting != "" {
			t.Errorf("the next claim of todo %d: %d %v %v, approval %+v; want it without the question", id, got.ID, ok, err, got.Approval)
		}
	}
	// An answer stays through a release.
	td, err := s.Claim(ctx, Ack{ID: ids[2], Owner: "agent:x"}, time.Minute)
	if err == nil {
		_, err = s.RequestApproval(ctx, Ack{ID: ids[2], Owner: "agent:x", LeaseSeq: td.LeaseSeq}, "ship it?")
	}
	if err == nil {
		_, err = s.Decide(ctx, ids[2], true, "go", "human:1")
	}
	if err == nil {
		_, err = s.Claim(ctx, Ack{ID: ids[2], Owner: "agent:x"}, time.Minute)
	}
	if err != nil {
		t.Fatal(err)
	}
	if released, err := s.ReleaseByHuman(ctx, ids[2], "human:1"); err != nil || released.Approval == nil || released.Approval.State != ApprovalApproved {
		t.Errorf("release of an approved todo: approval %+v (%v), want it kept", released.Approval, err)
	}
}

// After the hold, a decided todo the asker did not come back for is anyone's.
func TestApprovalHoldEnds(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	ctx := context.Background()
	id := awaitingApproval(t, s, "agent:w")
	if _, err := s.CancelTodo(ctx, id, "human:bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, id, true, "", "human:alice"); !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "cancelled") {
		t.Fatalf("a decision on a cancelled todo: %v", err)
	}
	id = awaitingApproval(t, s, "agent:w")
	if _, err := s.Decide(ctx, id, true, "fine", "human:alice"); err != nil {
		t.Fatal(err)
	}
	clock.Add(ApprovalHold)
	got, ok, err := s.ClaimNext(ctx, "agent:other", []string{"deploy"}, time.Minute)
	if err != nil || !ok || got.ID != id || got.Approval.State != ApprovalApproved {
		t.Fatalf("claim after the hold = %+v, %v, %v", got, ok, err)
	}
	// Its retry's backoff is no hold for the worker that asked.
	if _, err := s.Fail(ctx, Ack{ID: id, Owner: "agent:other", LeaseSeq: got.LeaseSeq}, "flaky", true); err != nil {
		t.Fatal(err)
	}
	if td, ok, _ := s.ClaimNext(ctx, "agent:w", []string{"deploy"}, time.Minute); ok {
		t.Fatalf("the asker claimed %d during another worker's retry backoff", td.ID)
	}
}

// awaitingApproval adds a todo to queue deploy that owner claims and asks about.
func awaitingApproval(t *testing.T, s *Store, owner string) int64 {
	t.Helper()
	ctx := context.Background()
	id := addTodos(t, s, "deploy", 1)[0]
	td, err := s.Claim(ctx, Ack{ID: id, Owner: owner}, time.Minute)
	if err == nil {
		_, err = s.RequestApproval(ctx, Ack{ID: id, Owner: owner, LeaseSeq: td.LeaseSeq}, "go?")
	}
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// A queue resumed by another process (the CLI) rings this process's doorbell:
// the resume is announced as its head's return, through the audit row.
func TestResumeFromAnotherProcessRings(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := testkit.DB(t)
	serveSide, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer serveSide.Close()
	head := addTodos(t, serveSide, "deploys", 1)[0]
	if err := serveSide.PauseQueue(ctx, "deploys", "human:1"); err != nil {
		t.Fatal(err)
	}
	rang := make(chan TodoChange, 10)
	serveSide.OnTodoChange(func(c TodoChange) {
		if c.Cause == "resume" {
			rang <- c
		}
	})
	watching := make(chan struct{}, 1)
	serveSide.OnForeignCommit(func() {
		select {
		case watching <- struct{}{}:
		default:
		}
	})
	done := make(chan struct{})
	go func() { serveSide.WatchForeign(ctx, 5*time.Millisecond); close(done) }()
	cli, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// Pause and resume another queue until the watcher reports a foreign commit:
	// it is surely watching before the resume that counts.
	for i := 0; ; i++ {
		cli.PauseQueue(ctx, "probe", "human:cli")
		cli.ResumeQueue(ctx, "probe", "human:cli")
		select {
		case <-watching:
		case <-time.After(50 * time.Millisecond):
			if i == 200 {
				t.Fatal("the watcher never reported a foreign commit")
			}
			continue
		}
		break
	}
	if err := cli.ResumeQueue(ctx, "deploys", "human:cli"); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-rang:
		if c.ID != head || !c.Claimable || c.Queue != "deploys" {
			t.Fatalf("rang for %+v, want the head %d", c, head)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no ring for a queue resumed by another process")
	}
	cancel()
	<-done
}

// A reservation (the hold an approved todo keeps for the worker that asked)
// ends with any claim: once another worker claimed the todo after the hold and
// failed it, the backoff holds for the first worker too, on either database,
// whichever way the todo was claimed.
func TestAClaimEndsAReservation(t *testing.T) {
	for _, how := range []string{"claim_next on two queues", "claim by id"} {
		t.Run(how, func(t *testing.T) {
			clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			s := openTest(t, Options{Now: clock.Now})
			ctx := context.Background()
			id := awaitingApproval(t, s, "agent:x")
			if _, err := s.Decide(ctx, id, true, "", "human:1"); err != nil {
				t.Fatal(err)
			}
			clock.Add(ApprovalHold + time.Second) // the hold is over: anyone may claim it
			var td Todo
			var err error
			if how == "claim by id" {
				td, err = s.Claim(ctx, Ack{ID: id, Owner: "agent:y"}, time.Minute)
			} else {
				var ok bool
				td, ok, err = s.ClaimNext(ctx, "agent:y", []string{"other", "deploy"}, time.Minute)
				if err == nil && !ok {
					t.Fatal("nothing claimed")
				}
			}
			if err != nil || td.ID != id {
				t.Fatalf("claim by agent:y: %v, todo %d", err, td.ID)
			}
			failed, err := s.Fail(ctx, Ack{ID: id, Owner: "agent:y", LeaseSeq: td.LeaseSeq}, "boom", true)
			if err != nil || !failed.AvailableAt.After(clock.Now()) {
				t.Fatalf("fail with retry: %v, available %v", err, failed.AvailableAt)
			}
			if got, ok, err := s.ClaimNext(ctx, "agent:x", []string{"deploy"}, time.Minute); err != nil || ok {
				t.Fatalf("agent:x claimed todo %d during its backoff (%v)", got.ID, err)
			}
		})
	}
}

// The human gate's reservation: after a decision, claim_next gives the todo to
// the worker that asked before anything else, on whichever of the claim's
// queues it is, whatever older reservations of the worker on other queues say
// (the claim gate once looked at the oldest alone, and dropped it when its queue
// was not asked for: the worker got nothing, on SQLite, and on PostgreSQL for a
// claim on several queues).
func TestAReservationOnAnAskedQueueIsHonouredWhateverOlderOnesSay(t *testing.T) {
	for _, queues := range [][]string{{"qb"}, {"qb", "qc"}} {
		t.Run(fmt.Sprintf("%d-queues", len(queues)), func(t *testing.T) {
			clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			s := openTest(t, Options{Now: clock.Now})
			ctx := context.Background()
			ask := func(queue string) int64 {
				id := addTodos(t, s, queue, 1)[0]
				approved(t, s, id, "agent:w")
				return id
			}
			ask("qa")      // the older reservation, on a queue this claim does not ask for
			b := ask("qb") // reserved for agent:w on qb
			td, ok, err := s.ClaimNext(ctx, "agent:w", queues, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if !ok || td.ID != b {
				t.Fatalf("agent:w's claim on %v = %d (ok %v); want todo %d, reserved for it on qb", queues, td.ID, ok, b)
			}
		})
	}
}

// approved has owner claim todo id, ask for approval, and a human approve it:
// the todo is then reserved for owner.
func approved(t *testing.T, s *Store, id int64, owner string) {
	t.Helper()
	ctx := context.Background()
	td, err := s.Claim(ctx, Ack{ID: id, Owner: owner}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestApproval(ctx, Ack{ID: id, Owner: owner, LeaseSeq: td.LeaseSeq}, "ok?"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, id, true, "yes", "human:alice"); err != nil {
		t.Fatal(err)
	}
}

// A todo cancelled while it awaited approval and then retried by id comes back
// without the question: no human can answer it any more (the todo is not
// claimed by the worker that asked), yet the next worker's claim carried
// approval "asked" and the board showed it as awaiting a decision.
func TestARetryOfATodoCancelledAwaitingApprovalDropsTheQuestion(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	ids := addTodos(t, s, "deploy", 1)
	td, err := s.Claim(ctx, Ack{ID: ids[0], Owner: "agent:w"}, time.Minute)
	if err == nil {
		_, err = s.RequestApproval(ctx, Ack{ID: ids[0], Owner: "agent:w", LeaseSeq: td.LeaseSeq}, "ship it?")
	}
	if err == nil {
		_, err = s.CancelTodo(ctx, ids[0], "human:1")
	}
	if err != nil {
		t.Fatal(err)
	}
	retried, err := s.Retry(ctx, ids[0], "human:1")
	if err != nil || retried.Approval != nil {
		t.Fatalf("retry of a todo cancelled awaiting approval: approval %+v (%v), want none", retried.Approval, err)
	}
	got, ok, err := s.ClaimNext(ctx, "agent:next", []string{"deploy"}, time.Minute)
	if err != nil || !ok || got.ID != ids[0] || got.Approval != nil {
		t.Fatalf("the next claim of todo %d: %d %v %v, approval %+v; want it without the question", ids[0], got.ID, ok, err, got.Approval)
	}
}

// A todo released while it awaited approval by a Switchboard from before
// releases withdrew the question still carries it; migration 0025 withdraws it,
// so that its next worker's claim has no question no one can answer.
func TestMigrationWithdrawsTheQuestionsOfTodosReleasedBefore(t *testing.T) {
	ctx := context.Background()
	db := testkit.DB(t)
	s, err := Open(ctx, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ids := addTodos(t, s, "deploy", 2)
	for _, id := range ids {
		td, err := s.Claim(ctx, Ack{ID: id, Owner: "agent:w"}, time.Minute)
		if err == nil {
			_, err = s.RequestApproval(ctx, Ack{ID: id, Owner: "agent:w", LeaseSeq: td.LeaseSeq}, "ship it?")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// ids[0] released as an older Switchboard released it; ids[1] still waits.
	err = s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`UPDATE todos SET state = 'pending', owner = NULL WHERE id = ?`, ids[0]); err != nil {
			return err
		}
		_, err := w.exec(`DELETE FROM schema_migrations WHERE version = 25`)
		return err
	})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}
	s, err = Open(ctx, db, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got, err := s.Todo(ctx, ids[0]); err != nil || got.Approval != nil {
		t.Errorf("todo %d released before, after the migration: approval %+v (%v), want none", ids[0], got.Approval, err)
	}
	if got, err := s.Todo(ctx, ids[1]); err != nil || got.Approval == nil || got.Approval.State != ApprovalAsked || got.Waiting != WaitingApproval {
		t.Errorf("todo %d still awaiting approval, after the migration: approval %+v waiting %q (%v)", ids[1], got.Approval, got.Waiting, err)
	}
}
