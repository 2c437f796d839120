package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/bench"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/store"
)

// switchboard bench end to end, small: it starts serve as a child process (this
// test binary, through TestMain), drives it over HTTP and MCP and reports.
func TestBenchRunsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process and drives it")
	}
	code, out, stderr := cli(t, "", "bench", "--deliveries", "300", "--senders", "8", "--agents", "3",
		"--doorbells", "20", "--duration", "300ms", "--json")
	if code != 0 {
		t.Fatalf("bench exited %d: %s", code, stderr)
	}
	var r struct {
		Floor     float64   `json:"floor_commits_per_sec"`
		FloorRuns []float64 `json:"floor_runs"`
		Ingest    struct {
			Deliveries int     `json:"deliveries"`
			Errors     int     `json:"errors"`
			PerSec     float64 `json:"per_sec"`
			Ratio      float64 `json:"ratio_to_floor"`
			Latency    struct {
				Count int     `json:"count"`
				P99   float64 `json:"p99_ms"`
			} `json:"latency"`
		} `json:"ingest"`
		Drain struct {
			Loop      string  `json:"loop"`
			Todos     int     `json:"todos"`
			Errors    int     `json:"errors"`
			PerSec    float64 `json:"per_sec"`
			CPU       float64 `json:"server_cpu_ms_per_todo"`
			ClaimNext struct {
				Count int `json:"count"`
			} `json:"claim_next"`
		} `json:"drain"`
		Doorbell struct {
			Rung    int `json:"rung"`
			Latency struct {
				Count int `json:"count"`
			} `json:"latency"`
			Answered struct {
				Count int `json:"count"`
			} `json:"enqueue_answered"`
		} `json:"doorbell"`
		Process *struct {
			IdleRSSMB float64 `json:"idle_rss_mb"`
			CPU       float64 `json:"cpu_seconds"`
		} `json:"process"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	// The floor is measured before and after the phases, and the higher counts.
	if len(r.FloorRuns) != 2 || r.Floor != max(r.FloorRuns[0], r.FloorRuns[1]) {
		t.Errorf("floor %v from runs %v, want the higher of two", r.Floor, r.FloorRuns)
	}
	if r.Floor <= 0 || r.Ingest.PerSec <= 0 || r.Ingest.Ratio <= 0 {
		t.Errorf("floor %v, ingest %v/s (ratio %v)", r.Floor, r.Ingest.PerSec, r.Ingest.Ratio)
	}
	if r.Ingest.Errors != 0 || r.Ingest.Latency.Count != 300 {
		t.Errorf("ingest: %d errors, %d latencies of 300", r.Ingest.Errors, r.Ingest.Latency.Count)
	}
	// Every delivery became a todo and the agents drained them all.
	if r.Drain.Errors != 0 || r.Drain.Todos < 300 || r.Drain.PerSec <= 0 || r.Drain.CPU <= 0 {
		t.Errorf("drain: %d todos at %v/s, %v ms CPU each, %d errors", r.Drain.Todos, r.Drain.PerSec, r.Drain.CPU, r.Drain.Errors)
	}
	// The lease contract's loop by default: a claim_next for every todo, and one
	// per agent to find the queue empty.
	if r.Drain.Loop != bench.LoopTwoCall || r.Drain.ClaimNext.Count < r.Drain.Todos {
		t.Errorf("drain: %s loop, %d claim_next calls for %d todos", r.Drain.Loop, r.Drain.ClaimNext.Count, r.Drain.Todos)
	}
	if r.Doorbell.Rung != 20 || r.Doorbell.Latency.Count == 0 || r.Doorbell.Answered.Count != 20 {
		t.Errorf("doorbell: rang %d of 20, heard %d, answers timed %d", r.Doorbell.Rung, r.Doorbell.Latency.Count,
			r.Doorbell.Answered.Count)
	}
	if r.Process == nil || r.Process.IdleRSSMB <= 0 || r.Process.CPU <= 0 {
		t.Errorf("no process figures: %+v", r.Process)
	}
}

// bench --protocol 2026-07-28 drains over stateless requests, and says so.
func TestBenchDrainsOverTheStatelessRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process and drives it")
	}
	code, out, stderr := cli(t, "", "bench", "--deliveries", "200", "--senders", "4", "--agents", "3",
		"--doorbells", "5", "--duration", "200ms", "--protocol", "2026-07-28", "--json")
	if code != 0 {
		t.Fatalf("bench exited %d: %s", code, stderr)
	}
	var r struct {
		Drain struct {
			Protocol string `json:"protocol"`
			Todos    int    `json:"todos"`
			Errors   int    `json:"errors"`
		} `json:"drain"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if r.Drain.Protocol != "2026-07-28" || r.Drain.Errors != 0 || r.Drain.Todos < 200 {
		t.Fatalf("drain: %+v", r.Drain)
	}
	if code, _, stderr := cli(t, "", "bench", "--protocol", "2099-01-01"); code != 2 || !strings.Contains(stderr, "--protocol") {
		t.Fatalf("bench --protocol 2099-01-01: exit %d: %s", code, stderr)
	}
}

// bench --loop one-call drains with complete's claim_next: true: claim_next is
// called only to start, and once more per agent to find the queue empty.
func TestBenchDrainsWithTheOneCallLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process and drives it")
	}
	code, out, stderr := cli(t, "", "bench", "--deliveries", "200", "--senders", "4", "--agents", "3",
		"--doorbells", "5", "--duration", "200ms", "--loop", "one-call", "--json")
	if code != 0 {
		t.Fatalf("bench exited %d: %s", code, stderr)
	}
	var r struct {
		Drain struct {
			Loop      string `json:"loop"`
			Todos     int    `json:"todos"`
			Errors    int    `json:"errors"`
			ClaimNext struct {
				Count int `json:"count"`
			} `json:"claim_next"`
			Complete struct {
				Count int `json:"count"`
			} `json:"complete"`
		} `json:"drain"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	d := r.Drain
	if d.Loop != bench.LoopOneCall || d.Errors != 0 || d.Todos < 200 || d.Complete.Count != d.Todos || d.ClaimNext.Count > 2*3 {
		t.Fatalf("drain: %+v", d)
	}
	if code, _, stderr := cli(t, "", "bench", "--loop", "three-call"); code != 2 || !strings.Contains(stderr, "--loop") {
		t.Fatalf("bench --loop three-call: exit %d: %s", code, stderr)
	}
}

// bench --url against an endpoint left at a low rate limit: the drain cannot run,
// so bench fails and says why instead of reporting a rate, and leaves no webhook
// behind on the server.
func TestBenchURLRefusesAThrottledDrain(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and drives it")
	}
	db := filepath.Join(t.TempDir(), "sb.db")
	cred := benchEndpoint(t, db, "--rate", "2", "--burst", "4")
	base, stop := startServer(t, server.Config{DB: db})
	defer stop()
	code, _, stderr := runCLI(t, map[string]string{"BENCH_CRED": cred}, "bench", "--url", base,
		"--credential-env", "BENCH_CRED", "--deliveries", "60", "--senders", "4", "--agents", "2", "--doorbells", "5",
		"--duration", "100ms")
	if code != 1 || !strings.Contains(stderr, "rate_limited") || !strings.Contains(stderr, "the drain completed") ||
		!strings.Contains(stderr, "the next run's drain completes those left on queue bench; any left claimed, once their 30-second lease has ended and the reaper has returned them") {
		t.Fatalf("bench against a throttled endpoint: exit %d, %q", code, stderr)
	}
	st := openRO(t, db)
	defer st.Close()
	hooks, err := st.ListWebhooks(context.Background(), store.WebhookFilter{})
	if err != nil || len(hooks) != 0 {
		t.Fatalf("bench left webhooks behind: %+v, %v", hooks, err)
	}
}

// bench --url leaves the target's queue as it found it: the doorbell's todos are
// completed too, and todos an earlier, failed run left on the queue are drained
// with this run's.
func TestBenchURLLeavesTheQueueEmpty(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and drives it")
	}
	db := filepath.Join(t.TempDir(), "sb.db")
	cred := benchEndpoint(t, db)
	const leftOver = 5 // as a failed run would leave them
	for range leftOver {
		if code, _, stderr := cli(t, "", "todo", "add", "--db", db, "--queue", "bench", "--payload", "left"); code != 0 {
			t.Fatalf("todo add: %s", stderr)
		}
	}
	base, stop := startServer(t, server.Config{DB: db})
	defer stop()
	code, out, stderr := runCLI(t, map[string]string{"BENCH_CRED": cred}, "bench", "--url", base,
		"--credential-env", "BENCH_CRED", "--deliveries", "60", "--senders", "4", "--agents", "2", "--doorbells", "5",
		"--duration", "100ms", "--json")
	if code != 0 {
		t.Fatalf("bench --url exited %d: %s", code, stderr)
	}
	var r struct {
		Ingest struct {
			Deliveries int `json:"deliveries"`
		} `json:"ingest"`
		Drain struct {
			Todos int `json:"todos"`
		} `json:"drain"`
		Doorbell struct {
			Rung int `json:"rung"`
		} `json:"doorbell"`
		SweepError *string `json:"sweep_error"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if r.SweepError != nil {
		t.Errorf("the sweep failed: %s", *r.SweepError)
	}
	if r.Drain.Todos < r.Ingest.Deliveries+leftOver || r.Doorbell.Rung != 5 {
		t.Errorf("drained %d todos after %d deliveries and %d left over; rang %d of 5", r.Drain.Todos,
			r.Ingest.Deliveries, leftOver, r.Doorbell.Rung)
	}
	st := openRO(t, db)
	defer st.Close()
	for _, state := range []string{store.StatePending, store.StateClaimed} {
		left, err := st.ListTodos(context.Background(), store.TodoFilter{Queues: []string{"bench"}, State: state})
		if err != nil || len(left) != 0 {
			t.Errorf("bench left %d todos %s on its queue (%v)", len(left), state, err)
		}
	}
	hooks, err := st.ListWebhooks(context.Background(), store.WebhookFilter{})
	if err != nil || len(hooks) != 0 {
		t.Fatalf("bench left webhooks behind: %+v, %v", hooks, err)
	}
}

// benchEndpoint creates the endpoint docs/performance.md tells bench --url users to make,
// with any further flags (a rate limit), and returns its credential.
func benchEndpoint(t *testing.T, db string, flags ...string) string {
	t.Helper()
	return createEndpoint(t, db, append([]string{"--agent", "bench", "--queues", "bench",
		"--max-webhooks", "2", "--webhook-sources", "generic,github"}, flags...)...)
}

// createEndpoint creates an endpoint in db with the CLI's flags and returns its
// credential.
func createEndpoint(t *testing.T, db string, flags ...string) string {
	t.Helper()
	code, out, stderr := cli(t, "", append([]string{"endpoint", "create", "--db", db, "--json"}, flags...)...)
	if code != 0 {
		t.Fatalf("endpoint create: %s", stderr)
	}
	var ep struct {
		Credential string `json:"credential"`
	}
	if err := json.Unmarshal([]byte(out), &ep); err != nil {
		t.Fatal(err)
	}
	return ep.Credential
}

// More agents than the endpoint may hold sessions: serve ends the oldest, and
// bench stops and says why, rather than report a rate over the refused calls.
func TestBenchURLSaysWhenTheServerEndsItsSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server and drives it")
	}
	db := filepath.Join(t.TempDir(), "sb.db")
	cred := benchEndpoint(t, db)
	base, stop := startServer(t, server.Config{DB: db, MaxSessions: 3})
	defer stop()
	code, _, stderr := runCLI(t, map[string]string{"BENCH_CRED": cred}, "bench", "--url", base,
		"--credential-env", "BENCH_CRED", "--deliveries", "60", "--senders", "4", "--agents", "4", "--doorbells", "5",
		"--duration", "100ms")
	if code != 1 || !strings.Contains(stderr, "the server ended an agent's session") ||
		!strings.Contains(stderr, "--max-sessions-per-endpoint") {
		t.Fatalf("bench with more agents than sessions: exit %d, %q", code, stderr)
	}
}

// --url is the base URL; one ending in /mcp (as .mcp.json's does) is refused
// with the URL to use.
func TestBenchURLWithMCPPathIsRefused(t *testing.T) {
	code, _, stderr := runCLI(t, map[string]string{"BENCH_CRED": "x"}, "bench", "--url", "http://127.0.0.1:1/sb/mcp/",
		"--credential-env", "BENCH_CRED")
	if code != 2 || !strings.Contains(stderr, "--url http://127.0.0.1:1/sb") {
		t.Fatalf("bench --url …/mcp: exit %d, %q", code, stderr)
	}
}

// A run that printed its figures but could not complete its todos or delete its
// webhooks still fails, saying what it left.
func TestBenchFailsWhenItLeftThingsBehind(t *testing.T) {
	if err := leftOnServer(&bench.Report{}); err != nil {
		t.Fatalf("a clean run: %v", err)
	}
	r := &bench.Report{SweepError: "could not complete the doorbell's todos: x", CleanupError: "could not delete its webhooks: y"}
	if err := leftOnServer(r); err == nil || !strings.Contains(err.Error(), "doorbell's todos: x; could not delete its webhooks: y") {
		t.Fatalf("a run that left things: %v", err)
	}
}

// A credential the server refuses is said at once, in words, before the floor is
// measured.
func TestBenchURLSaysTheCredentialWasRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	db := filepath.Join(t.TempDir(), "sb.db")
	benchEndpoint(t, db)
	base, stop := startServer(t, server.Config{DB: db})
	defer stop()
	code, _, stderr := runCLI(t, map[string]string{"BENCH_CRED": "sb_not-a-credential"}, "bench", "--url", base,
		"--credential-env", "BENCH_CRED", "--deliveries", "10")
	if code != 1 || !strings.Contains(stderr, "the server refused the credential (401 at "+base+"/mcp)") ||
		strings.Contains(stderr, "floor:") {
		t.Fatalf("bench with a wrong credential: exit %d, %q", code, stderr)
	}
}

// An endpoint that may not create webhooks is told apart from other failures,
// with the settings it needs.
func TestBenchURLSaysTheEndpointMayNotCreateWebhooks(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	db := filepath.Join(t.TempDir(), "sb.db")
	cred := createEndpoint(t, db, "--agent", "bench", "--queues", "bench")
	base, stop := startServer(t, server.Config{DB: db})
	defer stop()
	code, _, stderr := runCLI(t, map[string]string{"BENCH_CRED": cred}, "bench", "--url", base,
		"--credential-env", "BENCH_CRED", "--deliveries", "10", "--duration", "100ms")
	if code != 1 || !strings.Contains(stderr, "the endpoint may not create webhooks") ||
		!strings.Contains(stderr, "--max-webhooks 2 --webhook-sources generic,github") {
		t.Fatalf("bench with an endpoint that may not create webhooks: exit %d, %q", code, stderr)
	}
}
