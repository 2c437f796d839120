package store

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"
)

// What the paused-queue and reservation check (claimGate) adds to a claim:
// claim_next, an empty write transaction and one that runs claimGate alone,
// interleaved in one run on one store. gate/claim is the p50 of the gate's
// write less the empty one's, over claim_next's p50.
//
//	go test -run '^$' -bench ClaimGateShare -benchtime 5000x ./store
func BenchmarkClaimGateShare(b *testing.B) {
	backends := []string{"sqlite"}
	if os.Getenv("SWITCHBOARD_TEST_POSTGRES") != "" {
		backends = append(backends, "postgres")
	}
	for _, backend := range backends {
		b.Run(backend, func(b *testing.B) {
			s := openBenchStore(b, backend)
			ctx := context.Background()
			if err := s.SeedTodosForBench(ctx, "inbox", 1000+b.N, `{"n":1}`); err != nil {
				b.Fatal(err)
			}
			var claims, empties, gates []time.Duration
			timed := func(into *[]time.Duration, f func() error) {
				t0 := time.Now()
				if err := f(); err != nil {
					b.Fatal(err)
				}
				*into = append(*into, time.Since(t0))
			}
			b.ResetTimer()
			for range b.N {
				timed(&claims, func() error {
					_, _, err := s.ClaimNext(ctx, "agent:bench", []string{"inbox"}, time.Minute)
					return err
				})
				timed(&empties, func() error { return s.write(ctx, func(*wtx) error { return nil }) })
				timed(&gates, func() error {
					return s.write(ctx, func(w *wtx) error {
						_, _, err := w.gate("agent:bench", []string{"inbox"})
						return err
					})
				})
			}
			claim, gate := p50(claims), p50(gates)-p50(empties)
			b.ReportMetric(float64(claim.Microseconds()), "claim-p50-µs")
			b.ReportMetric(float64(gate.Microseconds()), "gate-p50-µs")
			b.ReportMetric(float64(gate)/float64(claim), "gate/claim")
		})
	}
}

func p50(d []time.Duration) time.Duration {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return d[len(d)/2]
}
