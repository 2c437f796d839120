package store

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// openPair opens the database at url twice, as serve and a CLI command in another
// process do.
func openPair(t *testing.T, url string) (serveSide, cli *Store) {
	t.Helper()
	for _, s := range []**Store{&serveSide, &cli} {
		st, err := Open(context.Background(), url, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		*s = st
	}
	return serveSide, cli
}

// watchListening runs s's WatchForeign, with an interval of an hour, until ctx
// ends, and returns once its listener is connected; done closes when it stops.
func watchListening(ctx context.Context, t *testing.T, s *Store) (done <-chan struct{}) {
	t.Helper()
	// The first scan after the listener connects runs the OnForeignCommit hooks.
	listening := make(chan struct{}, 1)
	s.OnForeignCommit(func() {
		select {
		case listening <- struct{}{}:
		default:
		}
	})
	stopped := make(chan struct{})
	go func() { s.WatchForeign(ctx, time.Hour); close(stopped) }()
	select {
	case <-listening:
	case <-time.After(30 * time.Second): // a guard against a hang, not a timing
		t.Fatal("the watch never listened")
	}
	return stopped
}

// `switchboard todo add` in another process rings serve's hooks through the
// notification its commit sends: the watch's interval is an hour, so nothing
// else could wake it within the test.
func TestWatchForeignWakesOnAnotherStoresNotification(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serveSide, cli := openPair(t, testkit.PostgresURL(t))
	rang := make(chan TodoChange, 10)
	serveSide.OnTodoChange(func(c TodoChange) { rang <- c })
	own, err := serveSide.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "own"})
	if err != nil {
		t.Fatal(err)
	}
	if c := <-rang; c.ID != own.ID {
		t.Fatalf("own add rang %+v", c)
	}
	done := watchListening(ctx, t, serveSide)

	foreign, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "from the CLI"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-rang:
		if c.ID != foreign.ID || !c.Claimable || c.Cause != "add" {
			t.Fatalf("rang for %+v, want the CLI's todo %d", c, foreign.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the CLI's add never rang serve's hooks")
	}
	select {
	case c := <-rang:
		t.Fatalf("rang again for %+v", c)
	default:
	}
	cancel()
	<-done
}

// A todo whose id was taken before another's but committed after it (two
// processes inserting at once) is still announced, once: the watch looks again
// for the ids it passed without seeing.
func TestWatchForeignSeesATodoCommittedLate(t *testing.T) {
	ctx := context.Background()
	url := testkit.PostgresURL(t)
	serveSide, cli := openPair(t, url)
	var rang []int64
	serveSide.OnTodoChange(func(c TodoChange) { rang = append(rang, c.ID) })
	watch, err := serveSide.newForeignWatch(ctx, serveSide.rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer serveSide.own.stop()

	slow, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close(ctx)
	tx, err := slow.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var late int64
	if err := tx.QueryRow(ctx, `INSERT INTO todos (queue, state, payload_size, created_by, available_at, created_at, updated_at)
		VALUES ('elsewhere', 'pending', 0, 'test', 0, 0, 0) RETURNING id`).Scan(&late); err != nil {
		t.Fatal(err)
	}
	early, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "committed first"})
	if err != nil {
		t.Fatal(err)
	}
	if early.ID <= late {
		t.Fatalf("the sequence gave %d after %d", early.ID, late)
	}
	watch.check(ctx)
	if !slices.Equal(rang, []int64{early.ID}) {
		t.Fatalf("before the late commit rang %v, want [%d]", rang, early.ID)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	watch.check(ctx)
	watch.check(ctx)
	if !slices.Equal(rang, []int64{early.ID, late}) {
		t.Fatalf("after the late commit rang %v, want [%d %d]", rang, early.ID, late)
	}
}

// Claims and completions committed by another process are not announced as todo
// changes here, but OnForeignTodoCommit hears that todos changed (for the
// board's live view), after the first one that the (re)connection runs.
func TestForeignClaimAndCompleteRunTheTodoCommitHooks(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serveSide, cli := openPair(t, testkit.PostgresURL(t))
	td, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "p"})
	if err != nil {
		t.Fatal(err)
	}
	redraw := make(chan struct{}, 10)
	serveSide.OnForeignTodoCommit(func() { redraw <- struct{}{} })
	done := make(chan struct{})
	go func() { serveSide.WatchForeign(ctx, time.Hour); close(done) }()
	wait := func(what string) {
		t.Helper()
		select {
		case <-redraw:
		case <-time.After(30 * time.Second): // a guard against a hang, not a timing
			t.Fatalf("no redraw after %s", what)
		}
	}
	wait("the listener connected")
	claimed, err := cli.Claim(ctx, Ack{ID: td.ID, Owner: "agent:a"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wait("a foreign claim")
	if _, err := cli.Complete(ctx, Ack{ID: td.ID, Owner: "agent:a", LeaseSeq: claimed.LeaseSeq}, ""); err != nil {
		t.Fatal(err)
	}
	wait("a foreign complete")
	cancel()
	<-done
}
