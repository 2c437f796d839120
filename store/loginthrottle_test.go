package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// A guesser spraying usernames or addresses cannot grow the shared login
// throttle without bound: the reaper's pass keeps the LoginThrottleRows keys
// failed most recently, and forgets those silent for LoginThrottleForget with
// no wait left; one still waiting is kept.
func TestLoginThrottleIsBounded(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	// Rows as other processes' counts left them (written at once: the test's
	// clock stands still, and a count forgets on the way what the pass would).
	insert := func(key func(i int) string, n int, last func(i int) time.Time, until time.Time) {
		t.Helper()
		err := s.write(ctx, func(w *wtx) error {
			for i := range n {
				if _, err := w.exec(`INSERT INTO login_throttle (key, failures, last_at, until_at) VALUES (?, 4, ?, ?)`,
					throttleHash(key(i)), ms(last(i)), ms(until)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	one := func(key string, last, until time.Time) {
		insert(func(int) string { return key }, 1, func(int) time.Time { return last }, until)
	}
	count := func() (n int) {
		t.Helper()
		if err := s.queryRow(ctx, `SELECT count(*) FROM login_throttle`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	has := func(key string) (found bool) {
		t.Helper()
		err := s.UpdateLoginThrottle(ctx, []string{key}, func(m map[string]*ThrottleEntry) { _, found = m[key] })
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	now := clock.Now()
	// Silent for longer than LoginThrottleForget: one done waiting, one still waiting.
	one("forgotten", now.Add(-LoginThrottleForget-time.Minute), time.Unix(0, 0))
	one("waiting", now.Add(-LoginThrottleForget-time.Minute), now.Add(time.Minute))
	one("recent", now, time.Unix(0, 0))
	if pruned, err := s.PruneLoginThrottle(ctx); err != nil || pruned != 1 || has("forgotten") || !has("waiting") || !has("recent") {
		t.Fatalf("forgetting: pruned %d (%v); want only the key done waiting gone", pruned, err)
	}
	// A spray from many addresses, 100 ms apart, the newest just before now.
	spray := LoginThrottleRows + 50
	insert(func(i int) string { return fmt.Sprintf("spray-%d", i) }, spray,
		func(i int) time.Time { return now.Add(time.Duration(i-spray) * 100 * time.Millisecond) }, time.Unix(0, 0))
	if n := count(); n != spray+2 {
		t.Fatalf("%d rows before the pass, want %d", n, spray+2)
	}
	pruned, err := s.PruneLoginThrottle(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(); n != LoginThrottleRows || pruned != int64(spray+2-LoginThrottleRows) {
		t.Fatalf("after the pass: %d rows (%d pruned), want %d", n, pruned, LoginThrottleRows)
	}
	// The longest idle went first: the key still waiting, then the spray's oldest.
	for key, want := range map[string]bool{"waiting": false, "spray-0": false, "spray-50": false, "spray-51": true,
		fmt.Sprintf("spray-%d", spray-1): true, "recent": true} {
		if has(key) != want {
			t.Errorf("%s kept: %v, want %v", key, !want, want)
		}
	}
}
