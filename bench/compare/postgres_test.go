package compare

// River on PostgreSQL (riverpgxv5, River's own pgx driver and its migrations)
// against Switchboard's store on the same server, in the same run: the server
// SWITCHBOARD_TEST_POSTGRES names, each queue in a fresh schema of its own (dropped
// afterwards), with synchronous_commit on, so an answered claim, completion or
// insert is in the server's flushed WAL. Without the variable these benchmarks skip.
//
// The floor here is the server's: one-row INSERT commits on one connection
// (store.MeasureFloor on the URL), measured once per run, so the ×floor column of
// these lines is not comparable with the SQLite ones'; the ratio between
// Switchboard's and River's msgs/s is.
//
// River runs as the SQLite version does (river_test.go): MaxWorkers 8, its default
// and its fastest fetch settings, its pgxpool at pgx's default size. On PostgreSQL
// River uses LISTEN/NOTIFY for its wake-ups.

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// postgresFloor is the SWITCHBOARD_TEST_POSTGRES server's.
var postgresFloor = &measuredFloor{measure: func() (float64, error) {
	return store.MeasureFloor(context.Background(), os.Getenv("SWITCHBOARD_TEST_POSTGRES"), store.Options{}, 2e9)
}}

// pgSchema is a fresh schema on SWITCHBOARD_TEST_POSTGRES for one benchmark, whose
// server must commit with synchronous_commit on; it skips without the variable.
func pgSchema(b *testing.B) string {
	b.Helper()
	if os.Getenv("SWITCHBOARD_TEST_POSTGRES") == "" {
		b.Skip("SWITCHBOARD_TEST_POSTGRES names no PostgreSQL server: River and the store on PostgreSQL not measured")
	}
	dbURL := testkit.PostgresURL(b)
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	var syncCommit string
	if err := conn.QueryRow(ctx, `SHOW synchronous_commit`).Scan(&syncCommit); err != nil || syncCommit != "on" {
		b.Fatalf("the server's synchronous_commit is %q (%v): these figures need it on", syncCommit, err)
	}
	return dbURL
}

// openSwitchboardPostgres opens Switchboard's store on a fresh schema.
func openSwitchboardPostgres(b *testing.B) *store.Store {
	b.Helper()
	st, err := store.Open(context.Background(), pgSchema(b), store.Options{Logger: quietLogger()})
	if err != nil {
		b.Fatalf("open store: %v", err)
	}
	b.Cleanup(func() { st.Close() })
	return st
}

// openRiverPostgres opens a pgx pool on a fresh schema holding River's tables.
func openRiverPostgres(b *testing.B) *pgxpool.Pool {
	b.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, pgSchema(b))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatalf("river migrations: %v", err)
	}
	return pool
}

// BenchmarkDrainPostgres is BenchmarkDrain and BenchmarkDrainRiver on PostgreSQL:
// b.N todos (jobs) filled in one transaction, then 8 workers until all are done.
func BenchmarkDrainPostgres(b *testing.B) {
	for _, loop := range storeLoops {
		b.Run(loop.name, func(b *testing.B) {
			st := openSwitchboardPostgres(b)
			if err := st.SeedTodosForBench(context.Background(), "bench", b.N, payload); err != nil {
				b.Fatal(err)
			}
			before := st.WriterStats()
			perSec := drain(b, loop.step(st))
			postgresFloor.report(b, perSec)
			reportWriter(b, before, st.WriterStats(), float64(b.N)/perSec)
		})
	}
	// Over MCP, through `switchboard bench --db` (mcp_test.go), on a schema of
	// its own that it drops.
	for _, loop := range []string{"two-call", "one-call"} {
		b.Run("switchboard-mcp-"+loop, func(b *testing.B) {
			pgSchema(b) // the same check of the server, and the skip without one
			mcpDrainOn(b, loop, os.Getenv("SWITCHBOARD_TEST_POSTGRES"), postgresFloor)
		})
	}
	for _, s := range riverSettings {
		b.Run("river-pgx-"+s.name, func(b *testing.B) {
			pool := openRiverPostgres(b)
			perSec := drainRiver(b, func(work func(*river.Job[riverArgs]) error) *river.Client[pgx.Tx] {
				client := newRiverWorkerClient(b, riverpgxv5.New(pool), s.fetchCooldown, s.pollInterval, work)
				fillRiverPostgres(b, client, b.N)
				return client
			}, func(q string) pgx.Row { return pool.QueryRow(context.Background(), q) })
			postgresFloor.report(b, perSec)
		})
	}
}

// fillRiverPostgres inserts n jobs in one transaction.
func fillRiverPostgres(b *testing.B, client *river.Client[pgx.Tx], n int) {
	b.Helper()
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: riverArgs{Payload: json.RawMessage(payload)}}
	}
	if _, err := client.InsertManyFast(context.Background(), params); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkIngestPostgres is BenchmarkIngest and BenchmarkIngestRiver on
// PostgreSQL: 32 senders post b.N signed deliveries, each answered once stored.
func BenchmarkIngestPostgres(b *testing.B) {
	secret, err := ingest.NewSecret("github")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("switchboard", func(b *testing.B) { ingestSwitchboard(b, openSwitchboardPostgres(b), postgresFloor, secret) })
	b.Run("river-pgx", func(b *testing.B) {
		pool := openRiverPostgres(b)
		client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(riverHandler(client, secret))
		defer srv.Close()
		send(b, postgresFloor, srv.URL+"/webhooks/github", secret)
		var n int
		if err := pool.QueryRow(context.Background(), `SELECT count(*) FROM river_job`).Scan(&n); err != nil || n != b.N {
			b.Fatalf("river_job holds %d rows after %d deliveries (%v)", n, b.N, err)
		}
	})
}

// reportWriter reports how the store's writer spent a run of seconds: writes per
// commit, and the share of the run it was busy (near 1: the writer is the limit)
// and committing, and the writer's time outside its commits per message.
func reportWriter(b *testing.B, before, after store.WriterStats, seconds float64) {
	batches := max(after.Batches-before.Batches, 1)
	b.ReportMetric(float64(after.Requests-before.Requests)/float64(batches), "writes/commit")
	// PostgreSQL's batches sent in one round trip (store/pipeline.go).
	b.ReportMetric(float64(after.Pipelined-before.Pipelined)/float64(batches), "pipelined/commit")
	// Writes sent in a statement shared with others of their kind (store/pipeline_sets.go).
	b.ReportMetric(float64(after.InSets-before.InSets)/float64(max(after.Requests-before.Requests, 1)), "in-sets")
	b.ReportMetric((after.Busy-before.Busy).Seconds()/seconds, "writer-busy")
	b.ReportMetric((after.Commit-before.Commit).Seconds()/seconds, "writer-committing")
	// The writer's time outside COMMIT, per message: its statements' round trips.
	stmts := (after.Busy - before.Busy) - (after.Commit - before.Commit)
	b.ReportMetric(float64(stmts.Microseconds())/float64(b.N), "writer-stmt-µs/msg")
}
