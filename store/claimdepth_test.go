package store

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// The cost of a claim at the store must not grow with the depth of its queue,
// on either database: one probe of the claim index (on PostgreSQL, one probe
// that locks and skips what others lock). Each backend, at each depth, gets a
// database of its own; PostgreSQL's runs when SWITCHBOARD_TEST_POSTGRES names a
// server. The queue is topped up by b.N before each run, so it stays at depth;
// p50 and p99 of single claims are reported beside the mean.
//
//	go test -run '^$' -bench ClaimNextDepth -benchtime 2000x ./store
func BenchmarkClaimNextDepth(b *testing.B) {
	backends := []string{"sqlite"}
	if os.Getenv("SWITCHBOARD_TEST_POSTGRES") != "" {
		backends = append(backends, "postgres")
	}
	for _, backend := range backends {
		for _, depth := range []int{1_000, 1_000_000} {
			if depth > 1_000 && testing.Short() {
				b.Logf("skipping depth %d under -short", depth)
				continue
			}
			var s *Store // opened and seeded by the first run: only if -bench asks for it
			ctx := context.Background()
			outer := b
			b.Run(fmt.Sprintf("%s/pending=%d", backend, depth), func(b *testing.B) {
				b.StopTimer()
				if s == nil {
					s = openBenchStore(outer, backend)
					if err := s.SeedTodosForBench(ctx, "inbox", depth, `{"n":1}`); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.SeedTodosForBench(ctx, "inbox", b.N, `{"n":1}`); err != nil {
					b.Fatal(err)
				}
				b.StartTimer() // MeasureCalls resets it
				testkit.MeasureCalls(b, []func(context.Context) error{func(ctx context.Context) error {
					if _, ok, err := s.ClaimNext(ctx, "agent:bench", []string{"inbox"}, time.Minute); err != nil || !ok {
						return fmt.Errorf("claim: %v %v", ok, err)
					}
					return nil
				}})
			})
		}
	}
}

// openBenchStore opens a fresh store on backend, whatever SWITCHBOARD_TEST_BACKEND says.
func openBenchStore(b *testing.B, backend string) *Store {
	b.Helper()
	db := filepath.Join(b.TempDir(), "switchboard.db")
	if backend == "postgres" {
		db = testkit.PostgresURL(b)
	}
	s, err := Open(context.Background(), db, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatalf("open %s: %v", backend, err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}
