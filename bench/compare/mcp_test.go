package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

// BenchmarkDrain's switchboard-mcp-* lines are the drain over MCP as `switchboard
// bench` measures it, run by this benchmark beside goqite's in process so that
// the ratio of the two is a line of this run's report: b.N signed deliveries go
// in through the webhook receiver (and bench's half-rate run adds some), then 8
// agents, each a session of its own over real HTTP on loopback, drain them from
// a `switchboard serve` process of its own, with the loop the line names. The
// server's CPU per todo drained is reported beside the rate.

// switchboardBinary builds the switchboard binary once per run.
var switchboardBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "compare-switchboard-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "switchboard")
	// In the repository's own module (this one's go.sum holds only what the
	// benchmarks import).
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build switchboard: %w: %s", err, out)
	}
	return bin, nil
})

// mcpDrain runs `switchboard bench` with b.N deliveries and the given loop, and
// reports its drain. The testing package's first call (b.N = 1) only probes: it
// runs nothing.
func mcpDrain(b *testing.B, loop string) {
	mcpDrainOn(b, loop, "", sqliteFloor)
}

// mcpDrainOn is mcpDrain with the server on the PostgreSQL database dbURL
// (`switchboard bench --db`), or on SQLite when dbURL is empty; floor is the one
// its rate is reported against.
func mcpDrainOn(b *testing.B, loop, dbURL string, floor *measuredFloor) {
	if b.N == 1 {
		return
	}
	bin, err := switchboardBinary()
	if err != nil {
		b.Fatal(err)
	}
	args := []string{"bench", "--deliveries", strconv.Itoa(b.N),
		"--agents", strconv.Itoa(workers), "--loop", loop, "--doorbells", "20", "--duration", "1s", "--json"}
	if dbURL != "" {
		args = append(args, "--db", dbURL)
	}
	b.ResetTimer()
	cmd := exec.CommandContext(context.Background(), bin, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	b.StopTimer()
	if err != nil {
		b.Fatalf("switchboard bench: %v\n%s", err, stderr.Bytes())
	}
	var r struct {
		Drain struct {
			Loop   string  `json:"loop"`
			Todos  int     `json:"todos"`
			Errors int     `json:"errors"`
			PerSec float64 `json:"per_sec"`
			CPUms  float64 `json:"server_cpu_ms_per_todo"`
			Agents int     `json:"agents"`
		} `json:"drain"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("switchboard bench --json: %v\n%s", err, out)
	}
	d := r.Drain
	if d.Loop != loop || d.Errors != 0 || d.Todos < b.N || d.Agents != workers {
		b.Fatalf("switchboard bench drained %+v, want %d todos by %d agents with the %s loop, no errors", d, b.N, workers, loop)
	}
	floor.report(b, d.PerSec)
	b.ReportMetric(d.CPUms*1000, "server-cpu-µs/todo")
}
