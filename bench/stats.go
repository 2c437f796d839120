// Package bench measures what a running Switchboard sustains: signed webhook
// deliveries in, todos drained by agents over MCP, doorbell latency, each also as a
// ratio to the raw durable commit rate of the same disk. It drives Switchboard only
// from outside, over HTTP and MCP, as real producers and agents do; it never reads
// the database behind the server's back.
package bench

import (
	"math"
	"sort"
	"sync"
	"time"
)

// Latencies collects durations from many goroutines.
type Latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

// Add records one duration.
func (l *Latencies) Add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// Summary is a latency distribution in milliseconds.
type Summary struct {
	Count int     `json:"count"`
	P50   float64 `json:"p50_ms"`
	P99   float64 `json:"p99_ms"`
	Max   float64 `json:"max_ms"`
}

// Summary computes the distribution (nearest-rank percentiles).
func (l *Latencies) Summary() Summary {
	l.mu.Lock()
	d := append([]time.Duration(nil), l.d...)
	l.mu.Unlock()
	if len(d) == 0 {
		return Summary{}
	}
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return Summary{Count: len(d), P50: msOf(percentile(d, 50)), P99: msOf(percentile(d, 99)), Max: msOf(d[len(d)-1])}
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	rank := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

func msOf(d time.Duration) float64 { return math.Round(float64(d)/1e3) / 1e3 }
