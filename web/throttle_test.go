package web

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// With the counts in the database (several serves on one PostgreSQL database),
// failures spread over two processes add up: the guesser's fourth wrong password
// waits, whichever process it goes to, and a success on one forgets the pair's
// failures on the other.
func TestThrottleCountsAcrossProcesses(t *testing.T) {
	clk := testkit.NewClock(time.Unix(1e9, 0))
	db := testkit.DB(t)
	var procs []*throttle
	for range 2 {
		st, err := store.Open(context.Background(), db, store.Options{Now: clk.Now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		th := newThrottle(clk.Now)
		th.shared, th.log = st, slog.New(slog.DiscardHandler)
		procs = append(procs, th)
	}
	a, b := procs[0], procs[1]
	for i, th := range []*throttle{a, b, a} {
		if got := th.fail("ana", "10.0.0.1"); got != 0 {
			t.Fatalf("free failure %d: wait %v", i+1, got)
		}
	}
	if got := b.fail("ana", "10.0.0.1"); got != throttleBase {
		t.Fatalf("the fourth failure, on the other process: wait %v, want %v", got, throttleBase)
	}
	if wait, try := a.begin(byAddress("ana", "10.0.0.1")); try != nil || wait != throttleBase {
		t.Fatalf("an attempt within the wait on the first process: wait %v, went ahead %v", wait, try != nil)
	}
	clk.Add(throttleBase)
	_, try := a.begin(byAddress("ana", "10.0.0.1"))
	if try == nil {
		t.Fatal("refused after the wait")
	}
	try.succeeded()
	for i := range 3 {
		if got := b.fail("ana", "10.0.0.1"); got != 0 {
			t.Fatalf("after a success on the other process, failure %d: wait %v", i+1, got)
		}
	}
}
