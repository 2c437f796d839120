package store

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// Todos another process hands back to their queue (the CLI revoking an agent
// releases its todos) are announced by the watch once, while still claimable; this
// process's own returns, announced when they were committed, are not announced
// again.
func TestWatchForeignAnnouncesAnotherProcesssReturns(t *testing.T) {
	ctx := context.Background()
	serveSide, cli := twoProcesses(t)
	took, expect := recordRings(t, serveSide, func(c TodoChange) string {
		return c.Cause + ":" + c.Queue + ":" + strconv.FormatInt(c.ID, 10)
	})

	var ids, seqs []int64
	for range 4 {
		td, err := serveSide.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "p", MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		if td, err = serveSide.Claim(ctx, Ack{ID: td.ID, Owner: "agent:1"}, time.Minute); err != nil {
			t.Fatal(err)
		}
		ids, seqs = append(ids, td.ID), append(seqs, td.LeaseSeq)
	}
	watch := watchOn(t, serveSide)
	took()

	// Its own release rings at its commit, and the watch does not ring it again.
	if _, err := serveSide.ReleaseByHuman(ctx, ids[0], "human:admin"); err != nil {
		t.Fatal(err)
	}
	expect("own release", "release:inbox:"+strconv.FormatInt(ids[0], 10))
	watch.check(ctx)
	expect("the watch after an own release")

	// Another process's release rings only through the watch, once.
	if _, err := cli.ReleaseByHuman(ctx, ids[1], "human:cli"); err != nil {
		t.Fatal(err)
	}
	expect("a foreign release before the watch looked")
	watch.check(ctx)
	expect("the watch after a foreign release", "release:inbox:"+strconv.FormatInt(ids[1], 10))
	if _, err := cli.AddTodo(ctx, NewTodo{Queue: "elsewhere", Payload: "moves data_version"}); err != nil {
		t.Fatal(err)
	}
	watch.check(ctx)
	if got := took(); len(got) != 1 || got[0][:4] != "add:" {
		t.Fatalf("the next foreign commit rang %q, want only its add", got)
	}

	// A returned todo that was claimed again before the watch looked is no news.
	if _, err := cli.ReleaseByHuman(ctx, ids[2], "human:cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Claim(ctx, Ack{ID: ids[2], Owner: "agent:2"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	watch.check(ctx)
	expect("the watch after a release claimed again")

	// A retry of a dead letter from another process rings as a retry.
	if _, err := serveSide.Fail(ctx, Ack{ID: ids[3], Owner: "agent:1", LeaseSeq: seqs[3]}, "broken", false); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Retry(ctx, ids[3], "human:cli"); err != nil {
		t.Fatal(err)
	}
	watch.check(ctx)
	expect("the watch after a foreign retry", "retry:inbox:"+strconv.FormatInt(ids[3], 10))

	// Another process's add followed by one of this process's before the watch
	// looks: the watch announces the foreign one, and not the own one again.
	foreign, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "from the cli"})
	if err != nil {
		t.Fatal(err)
	}
	own, err := serveSide.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "own"})
	if err != nil {
		t.Fatal(err)
	}
	expect("an own add after a foreign one", "add:inbox:"+strconv.FormatInt(own.ID, 10))
	watch.check(ctx)
	expect("the watch after a foreign then an own add", "add:inbox:"+strconv.FormatInt(foreign.ID, 10))
}

// recordRings records what s announces as claimable, each as name makes it:
// took hands over what was rung since it was last called, expect checks it.
func recordRings(t *testing.T, s *Store, name func(TodoChange) string) (took func() []string, expect func(what string, want ...string)) {
	var mu sync.Mutex
	var rang []string
	s.OnTodoChange(func(c TodoChange) {
		if c.Claimable {
			mu.Lock()
			rang = append(rang, name(c))
			mu.Unlock()
		}
	})
	took = func() []string {
		mu.Lock()
		defer mu.Unlock()
		got := rang
		rang = nil
		return got
	}
	expect = func(what string, want ...string) {
		t.Helper()
		if got := took(); !slices.Equal(got, want) {
			t.Fatalf("%s: rang %q, want %q", what, got, want)
		}
	}
	return took, expect
}

// A commit that fails leaves none of its adds or returns held as this process's
// own: their ids would be handed out again, to another process's rows.
func TestOwnChangesDropsAFailedCommitsIDs(t *testing.T) {
	var o ownChanges
	o.start()
	defer o.stop()
	batch := []*writeReq{{wtx: wtx{changes: []TodoChange{{ID: 1, auditID: 7, Cause: "release"}, {ID: 2, Cause: "add"},
		{ID: 4, Cause: "complete"}}}}, {err: context.Canceled, wtx: wtx{changes: []TodoChange{{ID: 3, auditID: 8}, {ID: 5, Cause: "add"}}}}}
	held := o.hold(batch)
	if !slices.Equal(held.returns, []int64{7}) || !slices.Equal(held.adds, []int64{2}) || !o.returned(7) || o.returned(8) ||
		!o.added(2) || o.added(5) || o.added(4) {
		t.Fatalf("held %+v", held)
	}
	o.drop(held)
	if o.returned(7) || o.added(2) {
		t.Fatal("a failed commit's ids are still held")
	}
}

// twoProcesses opens one database twice, as serve and a CLI command in another
// process do: the handles share the file and nothing else, so each hears the
// other's commits only through the foreign watch.
func twoProcesses(t *testing.T) (serveSide, cli *Store) {
	t.Helper()
	return openTwo(t, testkit.DB(t))
}

// watchOn starts a foreign watch on a connection of s's own, as WatchForeign
// does, for a test to check by hand; it ends with the test.
func watchOn(t *testing.T, s *Store) *foreignWatch {
	t.Helper()
	ctx := context.Background()
	conn, err := s.rdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	watch, err := s.newForeignWatch(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.own.stop)
	return watch
}

// Another process's delayed add, found by the watch's scan (no ring: SQLite, or a
// ring left out for its size), is not claimable yet: it rings when its delay ends.
func TestWatchForeignTimesAnotherProcesssDelayedAdd(t *testing.T) {
	ctx := context.Background()
	serveSide, cli := twoProcesses(t)
	_, expect := recordRings(t, serveSide, func(c TodoChange) string {
		return c.Cause + ":" + strconv.FormatInt(c.ID, 10)
	})
	watch := watchOn(t, serveSide)
	td, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "later", Options: TodoOptions{Delay: time.Hour}})
	if err != nil {
		t.Fatal(err)
	}
	watch.check(ctx)
	expect("the watch after a foreign delayed add")
	serveSide.wakeups.mu.Lock()
	at, timed := serveSide.wakeups.latest[td.ID]
	serveSide.wakeups.mu.Unlock()
	if !timed || ms(at) != ms(td.AvailableAt) {
		t.Fatalf("the delayed todo's wake-up: %v (timed %v), want %v", at, timed, td.AvailableAt)
	}
}

// A human's decision on a todo awaiting approval, made in another process (the
// board behind a balancer, the CLI), rings here as it does where it was made:
// now for the worker that asked, and for everyone when the hold ends.
func TestWatchForeignRingsAnotherProcesssApproval(t *testing.T) {
	ctx := context.Background()
	serveSide, cli := twoProcesses(t)
	_, expect := recordRings(t, serveSide, func(c TodoChange) string {
		return c.Cause + ":" + strconv.FormatInt(c.ID, 10)
	})
	td, err := serveSide.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "p"})
	if err != nil {
		t.Fatal(err)
	}
	if td, err = serveSide.Claim(ctx, Ack{ID: td.ID, Owner: "agent:1"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := serveSide.RequestApproval(ctx, Ack{ID: td.ID, Owner: "agent:1", LeaseSeq: td.LeaseSeq}, "ship it?"); err != nil {
		t.Fatal(err)
	}
	expect("own add", "add:"+strconv.FormatInt(td.ID, 10))
	watch := watchOn(t, serveSide)
	decided, err := cli.Decide(ctx, td.ID, true, "yes", "human:cli")
	if err != nil {
		t.Fatal(err)
	}
	watch.check(ctx)
	expect("the watch after a foreign approval", "approval_decided:"+strconv.FormatInt(td.ID, 10))
	serveSide.wakeups.mu.Lock()
	at, timed := serveSide.wakeups.latest[td.ID]
	serveSide.wakeups.mu.Unlock()
	if !timed || ms(at) != ms(decided.AvailableAt) {
		t.Fatalf("the hold's end: %v (timed %v), want %v", at, timed, decided.AvailableAt)
	}
}

// What another process commits after BeginWatchForeign returns is announced,
// however late the watch it returned starts: serve takes the baseline before it
// answers a request, and runs the watch beside the server.
func TestWatchAnnouncesWhatCommitsBetweenBeginAndRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serveSide, cli := twoProcesses(t)
	rang := make(chan TodoChange, 10)
	serveSide.OnTodoChange(func(c TodoChange) { rang <- c })
	if _, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "before"}); err != nil {
		t.Fatal(err)
	}
	watch, err := serveSide.BeginWatchForeign(ctx)
	if err != nil {
		t.Fatal(err)
	}
	td, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "between"})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- watch(5 * time.Millisecond) }()
	select {
	case c := <-rang:
		if c.ID != td.ID || c.Cause != "add" || !c.Claimable {
			t.Fatalf("rang %+v, want the add of todo %d (the one before the baseline is not announced)", c, td.ID)
		}
	case <-time.After(30 * time.Second): // a guard against a hang, not a timing
		t.Fatal("the add committed between the baseline and the watch never rang")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the watch ended with %v", err)
	}
}

// A todo another process coalesced into a debounced one becomes claimable later
// than its add said: the wake-up timed here for the add moves with it. (It rang
// at the first debounce's end, found nothing claimable, and never rang again:
// the todo waited while agents slept.)
func TestWatchForeignRetimesATodoAnotherProcessDebounced(t *testing.T) {
	ctx := context.Background()
	serveSide, cli := twoProcesses(t)
	watch := watchOn(t, serveSide)
	debounced := TodoOptions{Key: "pr-1", Coalesce: true, Debounce: time.Hour}
	first, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "a", Options: debounced})
	if err != nil {
		t.Fatal(err)
	}
	watch.check(ctx)
	wakeUp := func() time.Time {
		serveSide.wakeups.mu.Lock()
		defer serveSide.wakeups.mu.Unlock()
		return serveSide.wakeups.latest[first.ID]
	}
	if at := wakeUp(); ms(at) != ms(first.AvailableAt) {
		t.Fatalf("the add's wake-up: %v, want %v", at, first.AvailableAt)
	}
	// A later fold pushes the todo's debounce back (its clock has moved on).
	var folded Todo
	for folded.AvailableAt.Compare(first.AvailableAt) <= 0 {
		if folded, err = cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "b", Options: debounced}); err != nil {
			t.Fatal(err)
		}
	}
	if folded.ID != first.ID {
		t.Fatalf("the second add made todo %d, want it folded into %d", folded.ID, first.ID)
	}
	watch.check(ctx)
	if at := wakeUp(); ms(at) != ms(folded.AvailableAt) {
		t.Fatalf("the wake-up after the fold: %v, want %v", at, folded.AvailableAt)
	}
}
