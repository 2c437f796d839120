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

func addOpts(t *testing.T, s *Store, queue, payload string, o TodoOptions) Todo {
	t.Helper()
	td, err := s.AddTodo(context.Background(), NewTodo{Queue: queue, Payload: payload, CreatedBy: "human:1", Options: o})
	if err != nil {
		t.Fatalf("add %q %+v: %v", payload, o, err)
	}
	return td
}

// claimIDs claims until nothing is claimable and returns the ids in claim order.
func claimIDs(t *testing.T, s *Store, queues ...string) []int64 {
	t.Helper()
	var ids []int64
	for {
		td, ok, err := s.ClaimNext(context.Background(), "agent:a", queues, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return ids
		}
		ids = append(ids, td.ID)
	}
}

func complete(t *testing.T, s *Store, td Todo) {
	t.Helper()
	cur, err := s.Todo(context.Background(), td.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(context.Background(), Ack{ID: td.ID, Owner: cur.Owner, LeaseSeq: cur.LeaseSeq}, ""); err != nil {
		t.Fatalf("complete %d: %v", td.ID, err)
	}
}

func TestKeyedTodosOneAtATimeInOrder(t *testing.T) {
	s := openTest(t, Options{})
	a1 := addOpts(t, s, "q", "a1", TodoOptions{Key: "octo/repo#1"})
	b1 := addOpts(t, s, "q", "b1", TodoOptions{Key: "octo/repo#2"})
	a2 := addOpts(t, s, "q", "a2", TodoOptions{Key: "octo/repo#1"})
	free := addOpts(t, s, "q", "free", TodoOptions{})
	a3 := addOpts(t, s, "q", "a3", TodoOptions{Key: "octo/repo#1"})
	if !a2.KeyWaiting || !a3.KeyWaiting || a1.KeyWaiting {
		t.Fatalf("waiting: a1 %v a2 %v a3 %v, want false true true", a1.KeyWaiting, a2.KeyWaiting, a3.KeyWaiting)
	}
	// Held key #1 (a1) and #2 (b1): a2 and a3 are skipped, the keyless one is not.
	if got := claimIDs(t, s, "q"); !equalIDs(got, a1.ID, b1.ID, free.ID) {
		t.Fatalf("first claims %v, want %v", got, []int64{a1.ID, b1.ID, free.ID})
	}
	complete(t, s, a1)
	if got := claimIDs(t, s, "q"); !equalIDs(got, a2.ID) {
		t.Fatalf("after a1 done: %v, want [%d] (FIFO per key, one at a time)", got, a2.ID)
	}
	// A dead letter frees the key too.
	cur, _ := s.Todo(context.Background(), a2.ID)
	if _, err := s.Fail(context.Background(), Ack{ID: a2.ID, Owner: cur.Owner, LeaseSeq: cur.LeaseSeq}, "no", false); err != nil {
		t.Fatal(err)
	}
	// Retried while a3 is the front, a2 waits behind it.
	if _, err := s.Retry(context.Background(), a2.ID, "human:1"); err != nil {
		t.Fatal(err)
	}
	if got := claimIDs(t, s, "q"); !equalIDs(got, a3.ID) {
		t.Fatalf("after a2 dead and retried: %v, want [%d]", got, a3.ID)
	}
	complete(t, s, a3)
	if got := claimIDs(t, s, "q"); !equalIDs(got, a2.ID) {
		t.Fatalf("after a3 done: %v, want the retried a2 %d", got, a2.ID)
	}
	// A release keeps the key's place: the todo is claimable again, nothing else of its key.
	cur, _ = s.Todo(context.Background(), a2.ID)
	addOpts(t, s, "q", "a4", TodoOptions{Key: "octo/repo#1"})
	if _, err := s.Release(context.Background(), Ack{ID: a2.ID, Owner: cur.Owner, LeaseSeq: cur.LeaseSeq}); err != nil {
		t.Fatal(err)
	}
	if got := claimIDs(t, s, "q"); !equalIDs(got, a2.ID) {
		t.Fatalf("after release: %v, want [%d]", got, a2.ID)
	}
}

func equalIDs(got []int64, want ...int64) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}

func TestPriorityHighestFirstOldestWithin(t *testing.T) {
	s := openTest(t, Options{})
	low := addOpts(t, s, "q", "low", TodoOptions{Priority: -5})
	mid1 := addOpts(t, s, "q", "mid1", TodoOptions{})
	high := addOpts(t, s, "q", "high", TodoOptions{Priority: 10})
	mid2 := addOpts(t, s, "q", "mid2", TodoOptions{})
	other := addOpts(t, s, "r", "other", TodoOptions{Priority: 7})
	heads, err := s.QueueHeads(context.Background())
	if err != nil || len(heads) != 2 || heads[0].TodoID != high.ID {
		t.Fatalf("heads %+v %v, want q's head %d", heads, err, high.ID)
	}
	// Across queues too: priority first, then age.
	if got := claimIDs(t, s, "q", "r"); !equalIDs(got, high.ID, other.ID, mid1.ID, mid2.ID, low.ID) {
		t.Fatalf("claim order %v", got)
	}
}

func TestDelayedTodoWaits(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	later := addOpts(t, s, "q", "later", TodoOptions{Delay: time.Minute})
	if !later.AvailableAt.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("available_at %s", later.AvailableAt)
	}
	if got := claimIDs(t, s, "q"); len(got) != 0 {
		t.Fatalf("claimed %v before the delay ended", got)
	}
	clock.Add(time.Minute)
	if got := claimIDs(t, s, "q"); !equalIDs(got, later.ID) {
		t.Fatalf("after the delay: %v", got)
	}
}

// A delay or debounce of a fraction of a millisecond is stored in whole ones,
// rounded up; an add answers the todo as a read of it finds it (it answered
// available_at with the nanoseconds the store does not keep).
func TestAnAddAnswersTheAvailableAtItStored(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	for _, o := range []TodoOptions{
		{Delay: 1500 * time.Microsecond},
		{Key: "k", Coalesce: true, Debounce: 2*time.Second + 300*time.Microsecond},
		{Key: "k", Coalesce: true, Debounce: 2*time.Second + 300*time.Microsecond},
	} {
		added := addOpts(t, s, "q", "x", o)
		got, err := s.Todo(context.Background(), added.ID)
		if err != nil || !got.AvailableAt.Equal(added.AvailableAt) {
			t.Errorf("%+v: the add answered available_at %s, the todo holds %s (%v)", o, added.AvailableAt, got.AvailableAt, err)
		}
		if added.AvailableAt.Before(clock.Now().Add(max(o.Delay, o.Debounce))) {
			t.Errorf("%+v: available_at %s is sooner than asked", o, added.AvailableAt)
		}
		clock.Add(time.Millisecond)
	}
}

func TestCoalesceFoldsIntoPendingNeverClaimed(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	o := TodoOptions{Key: "pr#7", Coalesce: true}
	first := addOpts(t, s, "q", "v1", o)
	second := addOpts(t, s, "q", "v2", o)
	third := addOpts(t, s, "q", "v3", TodoOptions{Key: "pr#7", Coalesce: true, Priority: 3})
	if !second.Folded || second.ID != first.ID || third.ID != first.ID || third.Coalesced != 2 || third.Priority != 3 {
		t.Fatalf("folds: %+v %+v", second, third)
	}
	got, err := s.Todo(ctx, first.ID)
	if err != nil || got.Payload != "v3" || got.Coalesced != 2 {
		t.Fatalf("folded todo %+v %v: want payload v3, coalesced 2", got, err)
	}
	claimed, ok, err := s.ClaimNext(ctx, "agent:a", []string{"q"}, time.Minute)
	if err != nil || !ok || claimed.Payload != "v3" {
		t.Fatalf("claim %+v %v %v", claimed, ok, err)
	}
	// The claimed todo is never changed: a new one waits behind it, and the next folds into that.
	behind := addOpts(t, s, "q", "v4", o)
	again := addOpts(t, s, "q", "v5", o)
	if behind.Folded || !behind.KeyWaiting || !again.Folded || again.ID != behind.ID {
		t.Fatalf("behind %+v again %+v", behind, again)
	}
	if got, _ := s.Todo(ctx, first.ID); got.Payload != "v3" || got.Coalesced != 2 {
		t.Fatalf("the claimed todo changed: %+v", got)
	}
	// A producer that does not coalesce still adds its own todo.
	own := addOpts(t, s, "q", "v6", TodoOptions{Key: "pr#7"})
	if own.Folded || own.ID == behind.ID {
		t.Fatalf("non-coalescing add folded: %+v", own)
	}
	flows, err := s.QueueFlows(ctx)
	if err != nil || len(flows) != 1 || flows[0].Coalesced != 3 {
		t.Fatalf("flows %+v %v, want 3 coalesced on q", flows, err)
	}
	complete(t, s, claimed)
	if got := claimIDs(t, s, "q"); !equalIDs(got, behind.ID) {
		t.Fatalf("after done: %v, want %d", got, behind.ID)
	}
}

func TestDebounceRestartsUpToItsCap(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	start := clock.Now()
	s := openTest(t, Options{Now: clock.Now})
	o := TodoOptions{Key: "push", Coalesce: true, Debounce: 10 * time.Second, DebounceMax: 25 * time.Second}
	td := addOpts(t, s, "q", "1", o)
	if !td.AvailableAt.Equal(start.Add(10 * time.Second)) {
		t.Fatalf("first available_at %s, want 10s", td.AvailableAt.Sub(start))
	}
	for i := 0; i < 3; i++ {
		clock.Add(8 * time.Second)
		if got := claimIDs(t, s, "q"); len(got) != 0 {
			t.Fatalf("claimed during the burst at %s", clock.Now().Sub(start))
		}
		td = addOpts(t, s, "q", "more", o)
	}
	// Folds at 8, 16, 24 s: the window would end at 34 s; the cap ends it at 25 s.
	if want := start.Add(25 * time.Second); !td.AvailableAt.Equal(want) || td.Coalesced != 3 {
		t.Fatalf("available_at %s after the burst (coalesced %d), want the cap 25s", td.AvailableAt.Sub(start), td.Coalesced)
	}
	if got := claimIDs(t, s, "q"); len(got) != 0 {
		t.Fatalf("claimed before the cap: %v", got)
	}
	clock.Add(time.Second)
	if got := claimIDs(t, s, "q"); !equalIDs(got, td.ID) {
		t.Fatalf("after the burst: %v", got)
	}
}

// A fold never makes a todo claimable sooner than it already was: a delay
// longer than the debounce window, set when the todo was added, holds.
func TestDebounceKeepsALongerDelay(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	start := clock.Now()
	s := openTest(t, Options{Now: clock.Now})
	o := TodoOptions{Key: "push", Coalesce: true, Debounce: 10 * time.Second, Delay: 10 * time.Minute}
	td := addOpts(t, s, "q", "1", o)
	clock.Add(5 * time.Second)
	td = addOpts(t, s, "q", "more", o)
	if want := start.Add(10 * time.Minute); td.Coalesced != 1 || !td.AvailableAt.Equal(want) {
		t.Fatalf("available_at %s after a fold (coalesced %d), want the delay's 10m", td.AvailableAt.Sub(start), td.Coalesced)
	}
	clock.Add(time.Minute)
	if got := claimIDs(t, s, "q"); len(got) != 0 {
		t.Fatalf("claimed during its delay: %v", got)
	}
}

func TestFlowOptionsBadInput(t *testing.T) {
	s := openTest(t, Options{})
	for _, o := range []TodoOptions{
		{Key: strings.Repeat("k", MaxKeyBytes+1)},
		{Key: "a\nb"},
		{Priority: MaxPriority + 1},
		{Priority: MinPriority - 1},
		{Delay: -time.Second},
		{Coalesce: true},
		{Key: "k", Debounce: time.Second},
		{Key: "k", Coalesce: true, Debounce: time.Minute, DebounceMax: time.Second},
	} {
		_, err := s.AddTodo(context.Background(), NewTodo{Queue: "q", Payload: "x", Options: o})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", o, err)
		}
	}
	if todos, _ := s.ListTodos(context.Background(), TodoFilter{}); len(todos) != 0 {
		t.Fatalf("bad input wrote %d todos", len(todos))
	}
}

// The search's key finds a todo by its own key too, in any state.
func TestSearchFindsTodosByTheirKey(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	a := addOpts(t, s, "q", "a", TodoOptions{Key: "octo/repo#42"})
	addOpts(t, s, "q", "b", TodoOptions{Key: "octo/repo#43"})
	c := addOpts(t, s, "q", "c", TodoOptions{Key: "octo/repo#42"})
	complete(t, s, Todo{ID: claimIDs(t, s, "q")[0]})
	got, err := s.ListTodos(ctx, TodoFilter{Search: TodoSearch{Key: "octo/repo#42"}})
	if err != nil || len(got) != 2 || got[0].ID != c.ID || got[1].ID != a.ID || got[1].State != StateDone {
		t.Fatalf("key search: %+v (%v), want c then a (done)", got, err)
	}
}

// A human's cancel of a key's front frees the key, as a completion does: the
// next todo of the key is claimable.
func TestCancelFreesTheKey(t *testing.T) {
	s := openTest(t, Options{})
	a1 := addOpts(t, s, "q", "a1", TodoOptions{Key: "octo/repo#1"})
	a2 := addOpts(t, s, "q", "a2", TodoOptions{Key: "octo/repo#1"})
	if got := claimIDs(t, s, "q"); !equalIDs(got, a1.ID) {
		t.Fatalf("first claims %v, want [%d]", got, a1.ID)
	}
	if _, err := s.CancelTodo(context.Background(), a1.ID, "human:1"); err != nil {
		t.Fatal(err)
	}
	if got := claimIDs(t, s, "q"); !equalIDs(got, a2.ID) {
		t.Fatalf("after a1 was cancelled: %v, want [%d]", got, a2.ID)
	}
}

// A todo folded into by deliveries and by adds in turn always carries the
// newest one's payload: the event's body, or a row of its own.
func TestFoldTakesTheNewestPayloadWhereverItLives(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	hook, err := s.CreateWebhook(ctx, NewWebhook{SourceType: "generic", Queue: "prs", Secret: "s", CreatedBy: "human:1"})
	if err != nil {
		t.Fatal(err)
	}
	o := TodoOptions{Key: "octo/repo#42", Coalesce: true}
	first, err := s.AddTodo(ctx, NewTodo{Queue: "prs", Payload: "added-1", Options: o})
	if err != nil {
		t.Fatal(err)
	}
	for i, step := range []string{"event-1", "event-2", "added-2", "event-3", "added-3"} {
		if step[:5] == "event" {
			_, err = s.RecordDelivery(ctx, NewDelivery{WebhookID: hook.ID, DeliveryID: step, EventType: "push",
				TrustMode: "signed", Body: []byte(step), Options: o})
		} else {
			_, err = s.AddTodo(ctx, NewTodo{Queue: "prs", Payload: step, Options: o})
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Todo(ctx, first.ID)
		if err != nil || got.Payload != step || got.PayloadSize != len(step) || got.Coalesced != i+1 {
			t.Fatalf("after %s: payload %q (%d bytes), coalesced %d (%v)", step, got.Payload, got.PayloadSize, got.Coalesced, err)
		}
	}
}

// The human gate and coalescing. A human approved a step for a todo as it was
// (its payload, the question about it). After the decision the todo is pending
// again, with approval "approved", reserved for the worker that asked, which
// carries on after approved (docs/queue-control.md). A coalescing add of the
// same key does not fold into it, or the worker would carry out the step on
// content no human saw: the newcomer waits behind it as a todo of its own.
func TestACoalescingAddDoesNotRewriteAnApprovedTodo(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	ctx := context.Background()
	opts := TodoOptions{Key: "octo/repo#42", Coalesce: true}
	a, err := s.AddTodo(ctx, NewTodo{Queue: "deploy", Payload: `{"sha":"reviewed"}`, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	td, err := s.Claim(ctx, Ack{ID: a.ID, Owner: "agent:w"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestApproval(ctx, Ack{ID: a.ID, Owner: "agent:w", LeaseSeq: td.LeaseSeq}, "deploy reviewed?"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Decide(ctx, a.ID, true, "ship it", "human:alice"); err != nil {
		t.Fatal(err)
	}
	late, err := s.AddTodo(ctx, NewTodo{Queue: "deploy", Payload: `{"sha":"unreviewed"}`, Options: opts})
	if err != nil {
		t.Fatal(err)
	}
	got, ok, err := s.ClaimNext(ctx, "agent:w", []string{"deploy"}, time.Minute)
	if err != nil || !ok {
		t.Fatalf("the asker's claim: %v, %v", ok, err)
	}
	if got.ID == a.ID && got.Approval != nil && got.Approval.State == ApprovalApproved && got.Payload != `{"sha":"reviewed"}` {
		t.Fatalf("the coalescing add folded into the approved todo (folded=%v): agent:w claims todo %d as approved by %s "+
			"with payload %s, which no human saw", late.Folded, got.ID, got.Approval.By, got.Payload)
	}
}

// A todo released by a human while it awaited approval was never decided on: it
// carries its unanswered question, but no human's decision, so a coalescing add
// folds into it as into any pending todo (docs/flow-control.md) rather than
// waiting behind it as a second todo.
func TestACoalescingAddFoldsIntoATodoReleasedWhileAwaitingApproval(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	opts := TodoOptions{Key: "octo/repo#42", Coalesce: true}
	a := addOpts(t, s, "deploy", `{"sha":"one"}`, opts)
	td, err := s.Claim(ctx, Ack{ID: a.ID, Owner: "agent:w"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestApproval(ctx, Ack{ID: a.ID, Owner: "agent:w", LeaseSeq: td.LeaseSeq}, "deploy?"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReleaseByHuman(ctx, a.ID, "human:alice"); err != nil {
		t.Fatal(err)
	}
	late := addOpts(t, s, "deploy", `{"sha":"two"}`, opts)
	if !late.Folded || late.ID != a.ID {
		t.Fatalf("a coalescing add beside pending todo %d, released undecided, made todo %d (folded=%v, key_waiting=%v) "+
			"instead of folding into it", a.ID, late.ID, late.Folded, late.KeyWaiting)
	}
}

// A key's next todo becomes claimable when the todo ahead of it ends, not when
// it was added: the board's "next up waiting" and /metrics'
// switchboard_queue_head_wait_seconds count from then, so that a todo that
// waited behind a long piece of work is not shown (and alerted on) as one no
// agent took for that long.
func TestAKeysNextTodoIsClaimableSinceTheOneAheadEnded(t *testing.T) {
	ends := map[string]func(s *Store, td Todo) error{
		"complete": func(s *Store, td Todo) error {
			_, err := s.Complete(context.Background(), Ack{ID: td.ID, Owner: td.Owner, LeaseSeq: td.LeaseSeq}, "")
			return err
		},
		"dead letter": func(s *Store, td Todo) error {
			_, err := s.Fail(context.Background(), Ack{ID: td.ID, Owner: td.Owner, LeaseSeq: td.LeaseSeq}, "boom", false)
			return err
		},
		"cancel": func(s *Store, td Todo) error {
			_, err := s.CancelTodo(context.Background(), td.ID, "human:alice")
			return err
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			s := openTest(t, Options{Now: clock.Now})
			ctx := context.Background()
			addOpts(t, s, "q", "first", TodoOptions{Key: "k"})
			next := addOpts(t, s, "q", "second", TodoOptions{Key: "k"})
			first, ok, err := s.ClaimNext(ctx, "agent:a", []string{"q"}, time.Hour)
			if err != nil || !ok {
				t.Fatalf("claim: %v, %v", ok, err)
			}
			clock.Add(20 * time.Minute)
			if err := end(s, first); err != nil {
				t.Fatal(err)
			}
			heads, err := s.QueueHeads(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(heads) != 1 || heads[0].TodoID != next.ID || !heads[0].Since.Equal(clock.Now()) {
				t.Fatalf("heads %+v: want todo %d, claimable since %s, when the todo ahead of it ended", heads, next.ID, clock.Now())
			}
		})
	}
}

// A claim by id of a todo added with a delay (or a debounce) is refused as
// delayed: "backing off" is a failed attempt's retry, and this one was never tried.
func TestClaimByIdOfADelayedTodoSaysItIsDelayed(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	ctx := context.Background()
	later := addOpts(t, s, "q", "later", TodoOptions{Delay: 10 * time.Minute})
	_, err := s.Claim(ctx, Ack{ID: later.ID, Owner: "agent:a"}, time.Minute)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), "delayed until 2026-03-01T12:10:00Z") {
		t.Fatalf("claim of a delayed todo: %v, want a conflict saying it is delayed until 12:10", err)
	}
	// One that failed and waits for its retry is backing off.
	retried := addOpts(t, s, "q", "flaky", TodoOptions{})
	td, err := s.Claim(ctx, Ack{ID: retried.ID, Owner: "agent:a"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Fail(ctx, Ack{ID: td.ID, Owner: "agent:a", LeaseSeq: td.LeaseSeq}, "boom", true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, Ack{ID: retried.ID, Owner: "agent:a"}, time.Minute); !errors.Is(err, ErrConflict) ||
		!strings.Contains(err.Error(), "backing off") {
		t.Fatalf("claim of a todo backing off: %v", err)
	}
}

// A claim by id of a todo waiting behind its key names the todo it waits
// behind and that one's state: that todo may be pending (never claimed,
// released, its lease run out), and "being worked on" sent an agent to wait
// for a worker that did not exist rather than claim it.
func TestClaimByIdOfAWaitingTodoNamesTheTodoAhead(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	front := addOpts(t, s, "prs", "a", TodoOptions{Key: "k"})
	behind := addOpts(t, s, "prs", "b", TodoOptions{Key: "k"})
	_, err := s.Claim(ctx, Ack{ID: behind.ID, Owner: "agent:y"}, time.Minute)
	want := fmt.Sprintf("it waits behind todo %d of its key (pending)", front.ID)
	if !errors.Is(err, ErrConflict) || !strings.Contains(err.Error(), want) {
		t.Fatalf("claim by id of todo %d: %v, want a conflict saying %q", behind.ID, err, want)
	}
}
