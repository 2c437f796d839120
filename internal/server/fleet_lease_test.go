package server

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

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
