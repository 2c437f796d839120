package bench

import (
	"testing"
	"time"
)

func TestSummaryNearestRank(t *testing.T) {
	var l Latencies
	if got := l.Summary(); got.Count != 0 {
		t.Fatalf("empty summary %+v", got)
	}
	for i := 100; i >= 1; i-- { // added out of order
		l.Add(time.Duration(i) * time.Millisecond)
	}
	got := l.Summary()
	if got.Count != 100 || got.P50 != 50 || got.P99 != 99 || got.Max != 100 {
		t.Fatalf("summary of 1..100 ms = %+v, want p50 50, p99 99, max 100", got)
	}
}
