package compare

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
)

// The run's rates are kept as they are reported (measuredFloor.report) so that,
// once every benchmark has run, TestMain prints Switchboard's rate as a ratio to
// each other queue's in this same run: one line per pair, the median of the -count
// rounds and their range, e.g.
//
//	ratio drain: switchboard-store / goqite-sqlite = 2.41× (median of 5, 2.20–2.63)
//
// Round i of Switchboard is paired with round i of the other queue. Go runs each
// sub-benchmark's -count rounds back to back, so a pair's two rounds are minutes
// apart; the range shows how much the machine moved in between.
var rates = &rateLog{byName: map[string][]rate{}}

type rate struct {
	n      int // b.N: the testing package's first call (b.N = 1) is not a round
	perSec float64
}

type rateLog struct {
	mu     sync.Mutex
	byName map[string][]rate
}

func (l *rateLog) add(name string, n int, perSec float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byName[name] = append(l.byName[name], rate{n, perSec})
}

// rounds are name's rates at the largest b.N it ran with, in the order they ran.
func (l *rateLog) rounds(name string) []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	top := 0
	for _, r := range l.byName[name] {
		top = max(top, r.n)
	}
	var out []float64
	for _, r := range l.byName[name] {
		if r.n == top {
			out = append(out, r.perSec)
		}
	}
	return out
}

// family is one comparison: Switchboard's benchmark and the prefixes of the others.
type family struct {
	what, ours string
	others     []string
}

var families = []family{
	{"drain", "BenchmarkDrain/switchboard-store", []string{"BenchmarkDrain/goqite-", "BenchmarkDrainRiver/"}},
	{"drain", "BenchmarkDrain/switchboard-store-one-call", []string{"BenchmarkDrain/goqite-", "BenchmarkDrainRiver/"}},
	{"drain over MCP", "BenchmarkDrain/switchboard-mcp-two-call", []string{"BenchmarkDrain/goqite-"}},
	{"drain over MCP", "BenchmarkDrain/switchboard-mcp-one-call", []string{"BenchmarkDrain/goqite-"}},
	{"ingest", "BenchmarkIngest/switchboard", []string{"BenchmarkIngest/goqite-", "BenchmarkIngestRiver/"}},
	{"drain on PostgreSQL", "BenchmarkDrainPostgres/switchboard-store", []string{"BenchmarkDrainPostgres/river-"}},
	{"drain on PostgreSQL", "BenchmarkDrainPostgres/switchboard-store-one-call", []string{"BenchmarkDrainPostgres/river-"}},
	{"drain over MCP on PostgreSQL", "BenchmarkDrainPostgres/switchboard-mcp-two-call", []string{"BenchmarkDrainPostgres/river-"}},
	{"drain over MCP on PostgreSQL", "BenchmarkDrainPostgres/switchboard-mcp-one-call", []string{"BenchmarkDrainPostgres/river-"}},
	{"ingest on PostgreSQL", "BenchmarkIngestPostgres/switchboard", []string{"BenchmarkIngestPostgres/river-"}},
}

// print writes a ratio line for every pair this run measured, nothing otherwise.
func (l *rateLog) print(w io.Writer) {
	l.mu.Lock()
	names := make([]string, 0, len(l.byName))
	for name := range l.byName {
		names = append(names, name)
	}
	l.mu.Unlock()
	slices.Sort(names)
	for _, f := range families {
		ours := l.rounds(f.ours)
		for _, name := range names {
			if !hasAnyPrefix(name, f.others) {
				continue
			}
			if line := ratioLine(f.what, short(f.ours), short(name), ours, l.rounds(name)); line != "" {
				fmt.Fprintln(w, line)
			}
		}
	}
}

// ratioLine pairs the rounds of ours and theirs in order; "" when none pair up.
func ratioLine(what, oursName, theirName string, ours, theirs []float64) string {
	n := min(len(ours), len(theirs))
	var ratios []float64
	for i := range n {
		if theirs[i] > 0 {
			ratios = append(ratios, ours[i]/theirs[i])
		}
	}
	if len(ratios) == 0 {
		return ""
	}
	slices.Sort(ratios)
	return fmt.Sprintf("ratio %s: %s / %s = %.2f× (median of %d, %.2f–%.2f)",
		what, oursName, theirName, median(ratios), len(ratios), ratios[0], ratios[len(ratios)-1])
}

// median of sorted values (the mean of the middle two for an even count).
func median(sorted []float64) float64 {
	m := len(sorted) / 2
	if len(sorted)%2 == 0 {
		return (sorted[m-1] + sorted[m]) / 2
	}
	return sorted[m]
}

func hasAnyPrefix(s string, prefixes []string) bool {
	return slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(s, p) })
}

// short drops the benchmark function's name: "BenchmarkDrain/goqite-sqlite" → "goqite-sqlite".
func short(name string) string {
	_, sub, _ := strings.Cut(name, "/")
	return sub
}
