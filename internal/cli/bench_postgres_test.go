package cli

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// switchboard bench --db on PostgreSQL: the server runs on a schema of its own on
// that database, every delivery is drained, the report names the backend, the floor
// is the server's, and the schema is gone afterwards.
func TestBenchOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server process and drives it")
	}
	dbURL := testkit.PostgresURL(t)
	code, out, stderr := cli(t, "", "bench", "--db", dbURL, "--deliveries", "300", "--senders", "8", "--agents", "3",
		"--doorbells", "20", "--duration", "300ms", "--json")
	if code != 0 {
		t.Fatalf("bench --db exited %d: %s", code, stderr)
	}
	var r struct {
		Backend string  `json:"backend"`
		Floor   float64 `json:"floor_commits_per_sec"`
		Ingest  struct {
			Errors int     `json:"errors"`
			PerSec float64 `json:"per_sec"`
		} `json:"ingest"`
		Drain struct {
			Todos  int `json:"todos"`
			Errors int `json:"errors"`
		} `json:"drain"`
		Doorbell struct {
			Rung int `json:"rung"`
		} `json:"doorbell"`
	}
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("bench --json: %v\n%s", err, out)
	}
	if !strings.HasPrefix(r.Backend, "PostgreSQL ") || !strings.Contains(r.Backend, "synchronous_commit=") {
		t.Errorf("backend %q, want the PostgreSQL server named", r.Backend)
	}
	if r.Floor <= 0 || r.Ingest.Errors != 0 || r.Ingest.PerSec <= 0 {
		t.Errorf("floor %v, ingest %v/s with %d errors", r.Floor, r.Ingest.PerSec, r.Ingest.Errors)
	}
	if r.Drain.Errors != 0 || r.Drain.Todos < 300 || r.Doorbell.Rung != 20 {
		t.Errorf("drain: %d todos, %d errors; doorbell rang %d of 20", r.Drain.Todos, r.Drain.Errors, r.Doorbell.Rung)
	}
	_, schema, ok := strings.Cut(r.Backend, "schema ")
	schema, _, _ = strings.Cut(schema, " ")
	if !ok || !strings.HasPrefix(schema, "switchboard_bench_") {
		t.Fatalf("backend %q names no schema of the run", r.Backend)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var left int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_namespace WHERE nspname = $1`, schema).Scan(&left); err != nil || left != 0 {
		t.Errorf("schema %s: %d left after the run (%v)", schema, left, err)
	}
}

// --db is for PostgreSQL only: a file path is refused, as is a URL pgx cannot read,
// and an unreachable server is said in one line without the password.
func TestBenchDBRefusesWhatIsNotPostgres(t *testing.T) {
	for _, tc := range []struct{ db, want string }{
		{"/tmp/x.db", "--db takes a postgres:// or postgresql:// URL"},
		{"postgres://u:pw@127.0.0.1:notaport/x", "--db does not read as a PostgreSQL URL or settings"},
	} {
		code, _, stderr := cli(t, "", "bench", "--db", tc.db)
		if code != 2 || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "pw@") {
			t.Errorf("bench --db %s: exit %d, %q", tc.db, code, stderr)
		}
	}
	code, _, stderr := cli(t, "", "bench", "--db", "postgres://u:s3cret@127.0.0.1:1/x", "--duration", "100ms")
	if code != 1 || !strings.Contains(stderr, "PostgreSQL at 127.0.0.1:1") || strings.Contains(stderr, "s3cret") ||
		strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("bench --db on a closed port: exit %d, %q", code, stderr)
	}
}
