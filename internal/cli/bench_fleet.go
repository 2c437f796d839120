package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// bench against a fleet: several --url processes on one database, or --processes
// serve processes bench starts on one PostgreSQL schema; with a list of counts,
// one run per count and a table of each against the first.

// urlList is a repeatable flag whose values may also be comma lists.
type urlList []string

func (l *urlList) String() string { return strings.Join(*l, ",") }

func (l *urlList) Set(v string) error {
	for _, u := range strings.Split(v, ",") {
		if u = strings.TrimSpace(u); u != "" {
			*l = append(*l, u)
		}
	}
	return nil
}

// maxBenchProcesses bounds --processes: each is a serve bench starts on this machine.
const maxBenchProcesses = 16

// processCounts reads --processes ("1", "3", "1,2,3"); starting is whether bench
// starts the servers itself on PostgreSQL, which a count above 1 needs.
func processCounts(v string, starting bool) ([]int, error) {
	var counts []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > maxBenchProcesses {
			return nil, usageErr("--processes %q: want counts from 1 to %d, as in --processes 1,2,3", v, maxBenchProcesses)
		}
		counts = append(counts, n)
	}
	if !starting && (len(counts) > 1 || counts[0] > 1) {
		return nil, usageErr("--processes needs --db with a PostgreSQL URL and no --url: only PostgreSQL takes several " +
			"processes, and with --url the processes are those named (repeat --url)")
	}
	return counts, nil
}

// printBenchRuns prints the runs' reports; several runs also get a table of
// each against the first.
func printBenchRuns(env *environ, runs []benchRun, asJSON bool) error {
	if asJSON {
		if len(runs) == 1 {
			return writeJSON(env, runs[0])
		}
		return writeJSON(env, struct {
			Runs []benchRun `json:"runs"`
		}{runs})
	}
	for i, run := range runs {
		if i > 0 {
			fmt.Fprintln(env.stdout)
		}
		printBench(env.stdout, run.Machine, run.Backend, run.Report)
	}
	if len(runs) > 1 {
		printProcessRatios(env.stdout, runs)
	}
	return nil
}

// printProcessRatios is the table of each run against the first, which is the
// baseline the ratios divide by.
func printProcessRatios(w io.Writer, runs []benchRun) {
	first := runs[0].Report
	fmt.Fprintf(w, "\nby process count (ratios to the %d-process run above, same machine, same run):\n", first.Processes)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "processes\tingest/s\t×\tdrain/s\t×\tdoorbell p50 ms\tp99 ms\t")
	for _, run := range runs {
		r := run.Report
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f×\t%.0f\t%.2f×\t%.2f\t%.2f\t\n", r.Processes, r.Ingest.PerSec, r.Ingest.PerSec/first.Ingest.PerSec,
			r.Drain.PerSec, r.Drain.PerSec/first.Drain.PerSec, r.Doorbell.Latency.P50, r.Doorbell.Latency.P99)
	}
	tw.Flush()
}
