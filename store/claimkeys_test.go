package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// Claims stay flat in depth with keys and priorities: at a million pending
// todos over 10,000 keys, half of them held, with three priorities, a claim
// costs what it costs at a thousand plain todos. Todos waiting behind a key are
// outside the claim index, so a claim never walks past them. Per backend, the
// two databases are seeded first; then claims alternate between them, so that
// both see the same machine, and the ratio of their p50s is reported
// (deep/shallow; 1 = flat). Both are topped up by b.N plain todos so that
// neither runs dry.
//
//	go test -run '^$' -bench ClaimNextKeys -benchtime 2000x ./store
func BenchmarkClaimNextKeys(b *testing.B) {
	backends := []string{"sqlite"}
	if os.Getenv("SWITCHBOARD_TEST_POSTGRES") != "" {
		backends = append(backends, "postgres")
	}
	for _, backend := range backends {
		if testing.Short() {
			b.Logf("skipping a million todos under -short")
			continue
		}
		var shallow, deep *Store
		ctx := context.Background()
		outer := b
		b.Run(backend+"/pending=1000_vs_1000000_keys=10000_held=5000", func(b *testing.B) {
			if deep == nil {
				shallow, deep = openBenchStore(outer, backend), openBenchStore(outer, backend)
				if err := seedKeyedDepth(ctx, shallow, 1_000, 0, 0); err != nil {
					b.Fatal(err)
				}
				if err := seedKeyedDepth(ctx, deep, 1_000_000, 10_000, 5_000); err != nil {
					b.Fatal(err)
				}
			}
			lat := [2][]time.Duration{}
			for i, s := range []*Store{shallow, deep} {
				if err := s.SeedTodosForBench(ctx, "inbox", b.N, `{"n":1}`); err != nil {
					b.Fatal(err)
				}
				lat[i] = make([]time.Duration, 0, b.N)
			}
			b.ResetTimer()
			for range b.N {
				for i, s := range []*Store{shallow, deep} {
					t0 := time.Now()
					if _, ok, err := s.ClaimNext(ctx, "agent:bench", []string{"inbox"}, time.Hour); err != nil || !ok {
						b.Fatalf("claim: %v %v", ok, err)
					}
					lat[i] = append(lat[i], time.Since(t0))
				}
			}
			b.StopTimer()
			p50 := func(l []time.Duration) float64 {
				slices.Sort(l)
				return float64(l[len(l)/2].Microseconds())
			}
			a, d := p50(lat[0]), p50(lat[1])
			b.ReportMetric(a, "p50-µs-1k")
			b.ReportMetric(d, "p50-µs-1M-keyed")
			b.ReportMetric(d/max(a, 1), "deep/shallow")
		})
	}
}

// seedKeyedDepth puts depth todos on inbox: plain ones without keys, else over
// keys keys, of which held are then claimed (their fronts).
func seedKeyedDepth(ctx context.Context, s *Store, depth, keys, held int) error {
	if keys == 0 {
		return s.SeedTodosForBench(ctx, "inbox", depth, `{"n":1}`)
	}
	if err := s.SeedKeyedTodosForBench(ctx, "inbox", depth, keys); err != nil {
		return err
	}
	for i := 0; i < held; i++ {
		if _, ok, err := s.ClaimNext(ctx, "agent:holder", []string{"inbox"}, time.Hour); err != nil || !ok {
			return fmt.Errorf("hold key %d: %v %v", i, ok, err)
		}
	}
	return nil
}

// The keyed seed leaves what keyed adds leave: one front per key, claims in
// priority order, each key's next waiting until its front ends.
func TestSeedKeyedTodosForBench(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	if err := s.SeedKeyedTodosForBench(ctx, "inbox", 12, 4); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		td, ok, err := s.ClaimNext(ctx, "agent:a", []string{"inbox"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			break
		}
		got = append(got, fmt.Sprintf("%s/%d", td.Key, td.Priority))
	}
	if fmt.Sprint(got) != "[k2/2 k1/1 k0/0 k3/0]" {
		t.Fatalf("claimed %v, want the four fronts by priority then age", got)
	}
}

// BenchmarkDrainKeys compares, in one run, draining 2,000 plain todos with
// draining 2,000 todos over 100 keys (four workers claiming and completing):
// rounds alternate, and the ratio of the median rates is reported (keyed/plain;
// 1 = as fast). Each round's queue is seeded outside the timing.
//
//	go test -run '^$' -bench DrainKeys -benchtime 1x ./store
func BenchmarkDrainKeys(b *testing.B) {
	const n, keys, workers, rounds = 2000, 100, 4, 6
	backend := "sqlite"
	if os.Getenv("SWITCHBOARD_TEST_BACKEND") == "postgres" {
		backend = "postgres"
	}
	ctx := context.Background()
	s := openBenchStore(b, backend)
	drain := func(queue string) float64 {
		start := time.Now()
		done := make(chan error, workers)
		for range workers {
			go func() {
				for {
					td, ok, err := s.ClaimNext(ctx, "agent:bench", []string{queue}, time.Hour)
					if err != nil || !ok {
						done <- err
						return
					}
					if _, err := s.Complete(ctx, Ack{ID: td.ID, Owner: "agent:bench", LeaseSeq: td.LeaseSeq}, ""); err != nil {
						done <- err
						return
					}
				}
			}()
		}
		for range workers {
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		}
		return n / time.Since(start).Seconds()
	}
	var plain, keyed []float64
	for range b.N * rounds {
		if err := s.SeedTodosForBench(ctx, "plain", n, ""); err != nil { // no payload, as the keyed seed
			b.Fatal(err)
		}
		plain = append(plain, drain("plain"))
		if err := s.SeedKeyedTodosForBench(ctx, "keyed", n, keys); err != nil {
			b.Fatal(err)
		}
		keyed = append(keyed, drain("keyed"))
	}
	slices.Sort(plain)
	slices.Sort(keyed)
	p, k := plain[len(plain)/2], keyed[len(keyed)/2]
	b.ReportMetric(p, "plain-todos/s")
	b.ReportMetric(k, "keyed-todos/s")
	b.ReportMetric(k/p, "keyed/plain")
}

// A todo waiting behind its key is not claimed by id while the todo before it
// is worked on (two of one key at once), nor left stranded, pending behind a
// front that ended, once it goes back to its queue.
func TestClaimByIdRefusesATodoWaitingBehindItsKey(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	ctx := context.Background()
	a, err := s.AddTodo(ctx, NewTodo{Queue: "prs", Payload: "a", Options: TodoOptions{Key: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.AddTodo(ctx, NewTodo{Queue: "prs", Payload: "b", Options: TodoOptions{Key: "k"}})
	if err != nil || !b.KeyWaiting {
		t.Fatalf("b: %+v, %v; want it waiting behind a", b, err)
	}
	ta, ok, err := s.ClaimNext(ctx, "agent:x", []string{"prs"}, time.Minute)
	if err != nil || !ok || ta.ID != a.ID {
		t.Fatalf("claim_next: %v %v %d", err, ok, ta.ID)
	}
	if _, err := s.Claim(ctx, Ack{ID: b.ID, Owner: "agent:y"}, time.Minute); !errors.Is(err, ErrConflict) {
		t.Fatalf("claim by id of a todo waiting behind its key: %v, want a conflict", err)
	}
	if _, err := s.Complete(ctx, Ack{ID: a.ID, Owner: "agent:x", LeaseSeq: ta.LeaseSeq}, ""); err != nil {
		t.Fatal(err)
	}
	tb, err := s.Claim(ctx, Ack{ID: b.ID, Owner: "agent:y"}, time.Minute)
	if err != nil {
		t.Fatalf("claim by id once the key's todo before it ended: %v", err)
	}
	if _, err := s.Release(ctx, Ack{ID: b.ID, Owner: "agent:y", LeaseSeq: tb.LeaseSeq}); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := s.ClaimNext(ctx, "agent:z", []string{"prs"}, time.Minute); err != nil || !ok || got.ID != b.ID {
		t.Fatalf("claim_next after the release: %v %v %d, want todo %d", err, ok, got.ID, b.ID)
	}
}

// A keyed todo that ends is audited before its key's next todo is freed, on
// both backends: the audit log reads cause, then effect.
func TestAnEndIsAuditedBeforeTheKeyItFrees(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	for _, end := range []string{"complete", "dead_letter", "cancel"} {
		queue := "q-" + strings.ReplaceAll(end, "_", "-")
		var ids []int64
		for range 2 {
			td, err := s.AddTodo(ctx, NewTodo{Queue: queue, Payload: "x", MaxAttempts: 1, Options: TodoOptions{Key: "k"}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, td.ID)
		}
		action := "todo." + end
		switch end {
		case "cancel":
			if _, err := s.CancelTodo(ctx, ids[0], "human:1"); err != nil {
				t.Fatal(err)
			}
		default:
			td, ok, err := s.ClaimNext(ctx, "agent:x", []string{queue}, time.Minute)
			if err != nil || !ok || td.ID != ids[0] {
				t.Fatalf("claim_next: %v %v %d", err, ok, td.ID)
			}
			a := Ack{ID: td.ID, Owner: "agent:x", LeaseSeq: td.LeaseSeq}
			if end == "complete" {
				_, err = s.Complete(ctx, a, "")
			} else {
				_, err = s.Fail(ctx, a, "no", false)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		rows, err := s.ListAudit(ctx, AuditFilter{Limit: 2})
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 || rows[0].Action != "todo.key_free" || rows[0].Target != fmt.Sprintf("todo:%d", ids[1]) ||
			rows[1].Action != action || rows[1].Target != fmt.Sprintf("todo:%d", ids[0]) {
			t.Errorf("%s: the newest audit rows are %+v; want todo.key_free of %d after %s of %d", end, rows, ids[1], action, ids[0])
		}
	}
}
