package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// bench --processes 1,2 on PostgreSQL: one run per count, each on its own
// schema; the second spreads its agents and senders over two serve processes,
// every delivery is drained once, and the doorbell rings sessions on the process
// the deliveries did not go to.
func TestBenchFleetOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three server processes and drives them")
	}
	dbURL := testkit.PostgresURL(t)
	code, out, stderr := cli(t, "", "bench", "--db", dbURL, "--processes", "1,2", "--deliveries", "200", "--senders", "4",
		"--agents", "4", "--doorbells", "20", "--duration", "300ms", "--json")
	if code != 0 {
		t.Fatalf("bench --processes 1,2 exited %d: %s", code, stderr)
	}
	var r struct {
		Runs []struct {
			Backend   string `json:"backend"`
			Processes int    `json:"processes"`
			Drain     struct {
				Todos  int `json:"todos"`
				Errors int `json:"errors"`
			} `json:"drain"`
			Doorbell struct {
				Rung   int  `json:"rung"`
				Missed int  `json:"missed"`
				Across bool `json:"across_processes"`
			} `json:"doorbell"`
		} `json:"runs"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if len(r.Runs) != 2 || r.Runs[0].Processes != 1 || r.Runs[1].Processes != 2 || r.Runs[0].Backend == r.Runs[1].Backend {
		t.Fatalf("runs: %+v, want one process then two, each on a schema of its own", r.Runs)
	}
	for _, run := range r.Runs {
		if run.Drain.Todos < 200 || run.Doorbell.Rung != 20 || run.Doorbell.Missed != 0 || run.Doorbell.Across != (run.Processes > 1) {
			t.Errorf("%d processes: drained %d of 200 (%d errors), doorbell %+v", run.Processes, run.Drain.Todos,
				run.Drain.Errors, run.Doorbell)
		}
	}
}

// Several processes need a PostgreSQL bench starts itself.
func TestBenchProcessesNeedPostgres(t *testing.T) {
	for _, args := range [][]string{
		{"bench", "--processes", "2"},
		{"bench", "--processes", "1,0"},
		{"bench", "--db", "postgres://u@127.0.0.1:1/x", "--url", "http://127.0.0.1:1", "--processes", "2"},
	} {
		code, _, stderr := cli(t, "", args...)
		if code != 2 || !strings.Contains(stderr, "--processes") {
			t.Errorf("%v: exit %d, %q", args, code, stderr)
		}
	}
}
