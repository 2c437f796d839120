package compare

import (
	"strings"
	"testing"
)

// The testing package's first call (b.N = 1) is not a round, rounds pair up in
// order, and the line gives their median and range.
func TestRatioLines(t *testing.T) {
	l := &rateLog{byName: map[string][]rate{}}
	for _, r := range []struct {
		name string
		n    int
		rate float64
	}{
		{"BenchmarkDrain/switchboard-store", 1, 1},
		{"BenchmarkDrain/switchboard-store", 100, 300},
		{"BenchmarkDrain/goqite-sqlite", 1, 1000},
		{"BenchmarkDrain/goqite-sqlite", 100, 100},
		{"BenchmarkDrain/switchboard-store", 100, 400},
		{"BenchmarkDrain/goqite-sqlite", 100, 200},
		{"BenchmarkDrain/switchboard-store", 100, 500},
		{"BenchmarkDrain/goqite-sqlite", 100, 250},
		{"BenchmarkDrainRiver/river-sqlite-fast", 100, 50},
		{"BenchmarkWakeup/goqite-poll-100ms", 100, 7},
	} {
		l.add(r.name, r.n, r.rate)
	}
	var out strings.Builder
	l.print(&out)
	want := "ratio drain: switchboard-store / goqite-sqlite = 2.00× (median of 3, 2.00–3.00)\n" +
		"ratio drain: switchboard-store / river-sqlite-fast = 6.00× (median of 1, 6.00–6.00)\n"
	if out.String() != want {
		t.Fatalf("printed\n%s\nwant\n%s", out.String(), want)
	}
}

func TestRatioLinesNothingPaired(t *testing.T) {
	l := &rateLog{byName: map[string][]rate{}}
	l.add("BenchmarkDrain/goqite-sqlite", 100, 100)
	var out strings.Builder
	l.print(&out)
	if out.Len() != 0 {
		t.Fatalf("printed %q without a Switchboard round", out.String())
	}
}
