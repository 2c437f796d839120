package server

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// A process leads only while the lease its last good heartbeat took lasts, by its
// own clock: one that was paused (SIGSTOP, a stalled VM) or whose heartbeat hangs
// past the lease does not go on reaping as if it led, for another process has
// taken the role meanwhile.
func TestFleetLeadsOnlyWithinItsLease(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, testkit.DB(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var mu sync.Mutex
	clock := time.Now()
	f := newFleet(st, "v-test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	f.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	f.join(ctx)
	if !f.Leads() {
		t.Fatal("after joining: does not lead, want it to (alone)")
	}
	lease := leaseBeats * f.every
	mu.Lock()
	clock = clock.Add(lease - time.Millisecond)
	mu.Unlock()
	if !f.Leads() {
		t.Fatal("just within the lease: does not lead")
	}
	mu.Lock()
	clock = clock.Add(2 * time.Millisecond)
	mu.Unlock()
	if f.Leads() {
		t.Fatalf("%s after its last heartbeat, with a lease of %s: still leads", lease+time.Millisecond, lease)
	}
	f.beat(ctx)
	if !f.Leads() {
		t.Fatal("after a new heartbeat took the role again: does not lead")
	}
}

// Two processes on hosts whose clocks are two minutes apart, on one PostgreSQL:
// only one leads, however often both beat. Each counts its own hold on the role
// from its own heartbeat; whose lease is live, the database's clock says.
func TestFleetOnSkewedClocksHasOneLeader(t *testing.T) {
	ctx := context.Background()
	url := testkit.PostgresURL(t)
	member := func(skew time.Duration) *fleet {
		now := func() time.Time { return time.Now().Add(skew) }
		st, err := store.Open(ctx, url, store.Options{Now: now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		f := newFleet(st, "v-test", slog.New(slog.NewTextHandler(io.Discard, nil)))
		f.now = now
		return f
	}
	behind, ahead := member(-time.Minute), member(time.Minute)
	behind.join(ctx)
	ahead.join(ctx)
	for i := range 3 {
		behind.beat(ctx)
		ahead.beat(ctx)
		if !behind.Leads() || ahead.Leads() {
			t.Fatalf("after %d beats each: the first to join leads %v, the one whose clock runs ahead leads %v; want only the first",
				i+1, behind.Leads(), ahead.Leads())
		}
	}
}

// A process on PostgreSQL whose heartbeat fails steps back from the reaper and
// says so; it does not say another process runs it, which none may.
func TestFleetWhoseHeartbeatFailsSaysItSteppedBack(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, testkit.PostgresURL(t), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var logged testkit.LockedBuffer
	f := newFleet(st, "v-test", slog.New(slog.NewTextHandler(&logged, nil)))
	f.join(ctx)
	if !f.Leads() {
		t.Fatal("after joining: does not lead, want it to (alone on the database)")
	}
	st.Close() // every heartbeat from now on fails
	f.beat(ctx)
	if f.Leads() {
		t.Fatal("after a failed heartbeat: still leads")
	}
	if out := logged.String(); !strings.Contains(out, "heartbeat failed") || strings.Contains(out, "no longer runs the reaper") {
		t.Errorf("log after a failed heartbeat:\n%s\nwant it to say the heartbeat failed, and not that another process runs the reaper", out)
	}
}

// A process whose role another took while it was away (paused past its lease)
// says, as it steps back, which process runs the reaper now: the log named this
// process's id beside "another process runs the reaper now", as if it were the
// other's.
func TestFleetSteppingBackNamesTheNewLeader(t *testing.T) {
	ctx := context.Background()
	url := testkit.PostgresURL(t)
	var logged testkit.LockedBuffer
	member := func(log io.Writer) *fleet {
		st, err := store.Open(ctx, url, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return newFleet(st, "v-test", slog.New(slog.NewTextHandler(log, nil)))
	}
	paused, other := member(&logged), member(io.Discard)
	paused.join(ctx)
	other.join(ctx)
	if !paused.Leads() {
		t.Fatal("the first to join does not lead")
	}
	// The paused process's lease runs out; the other takes the role.
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `UPDATE leaders SET expires_at = 0`); err != nil {
		t.Fatal(err)
	}
	other.beat(ctx)
	if !other.Leads() {
		t.Fatal("the other process did not take the lapsed role")
	}
	// Its own clock has passed its lease too, as a SIGSTOP's would: it
	// stepped back without a word.
	paused.now = func() time.Time { return time.Now().Add(time.Hour) }
	paused.beat(ctx)
	if paused.Leads() {
		t.Fatal("the paused process still leads")
	}
	out := logged.String()
	if !strings.Contains(out, "leader="+other.self.ID) {
		t.Errorf("log as the paused process stepped back:\n%s\nwant it to name the leader, %s", out, other.self.ID)
	}
}
