package store

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// A claim on PostgreSQL reads a queue's head from todos_ready, a few index
// entries, whatever the table's statistics say. With none (a table not analysed
// yet) or stale ones (analysed while the queue was empty, before a burst of
// adds), PostgreSQL estimated one pending todo, so sorting looked free: it read
// every pending todo of the queue through todos_claimable and sorted them, on
// each claim (20 ms a claim at 40,000 pending; a drain of 40,000 ran at a third
// of the speed of one of 10,000). Each statement that reads a head runs here on
// a connection of the test's, whose transaction's own counters say how many
// todos' index entries and rows it read.
func TestEachHeadIsAProbeWhateverTheStatistics(t *testing.T) {
	const pending = 40000
	for _, stats := range statsKinds {
		t.Run(stats, func(t *testing.T) {
			s := pgStore(t)
			ctx := context.Background()
			conn := statsConn(t, s, "todos", stats)
			now := ms(s.now())
			ttl := time.Minute
			owner := "agent:a"
			set := [][]any{{"bench", "agent:a", ttl.Milliseconds(), int64(0), int64(0)},
				{"bench", "agent:b", ttl.Milliseconds(), int64(0), int64(0)},
				{"bench", "agent:c", ttl.Milliseconds(), int64(0), int64(0)}}
			pipelined := []string{pipelinePlans}
			// Each is planned first, from an empty table, as its plannings say.
			statements := []plannedStatement{
				{"the head, read", pgHead, pgHeadArgs("bench", now), planModes},
				{"a claim of one queue's head", pgClaimHead, pgClaimHeadArgs("bench", owner, now, now+ttl.Milliseconds()), writerPlans},
				{"a claim of one", pgClaimGated, pgClaimGatedArgs("bench", owner, ttl, 0, 0, now), pipelined},
				{"a claim of several", pgClaimSet, pgClaimSetKind.args(now, set), pipelined},
				{"the board's heads", pgQueueHeads, []any{now}, planModes},
			}
			// Planned first while the queue is empty, as on a new install, and
			// the plans kept for the connection's life: the reads of heads as
			// any statement is, the claims as the writer plans them (a claim of
			// one queue's head outside pipelined batches, which read all of
			// todos to find the head it locked when planned with sequential
			// scans allowed), or as a pipelined batch does.
			for _, c := range statements {
				for _, planning := range c.plannings {
					for range runsToKeepAPlan {
						checkReadsFew(t, conn, "todos", s.q(c.query), c.args, c.name, planning, false)
					}
				}
			}
			if err := s.SeedTodosForBench(ctx, "bench", pending, "x"); err != nil {
				t.Fatal(err)
			}
			for _, c := range statements {
				for _, planning := range []string{customPlans, genericPlans, pipelinePlans} {
					checkReadsFew(t, conn, "todos", s.q(c.query), c.args, c.name, planning, true)
				}
			}
		})
	}
}

// plannedStatement is a statement a test runs with args, planned as each of
// plannings (a statement each) sets.
type plannedStatement struct {
	name, query string
	args        []any
	plannings   []string
}

// statsKinds are the table statistics statsConn can leave: none, or taken now.
var statsKinds = []string{"none", "taken while empty"}

// runsToKeepAPlan runs of a prepared statement make PostgreSQL keep a plan for
// it: its custom plans for the first five, then its generic plan if that looks
// no dearer.
const runsToKeepAPlan = 6

// statsConn is a connection of the test's to s's schema, where table's statistics
// are as stats says ("none", or "taken while empty": analysed now) and
// autovacuum will not take them in its own time.
func statsConn(t *testing.T, s *Store, table, stats string) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `ALTER TABLE `+table+` SET (autovacuum_enabled = off)`); err != nil {
		t.Fatal(err)
	}
	if stats != "none" {
		if _, err := conn.Exec(ctx, `ANALYZE `+table); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// planModes are the two ways a prepared statement may be planned, and
// pipelinePlans the way a pipelined batch plans its statements.
var (
	planModes     = []string{customPlans, genericPlans}
	customPlans   = `SELECT set_config('plan_cache_mode', 'force_custom_plan', true)`
	genericPlans  = `SELECT set_config('plan_cache_mode', 'force_generic_plan', true)`
	pipelinePlans = `SELECT ` + pgPipelinePlanning + `, ` + pgWriterPlanning
	writerPlans   = []string{customPlans + `, ` + pgWriterPlanning, genericPlans + `, ` + pgWriterPlanning}
)

// checkReadsFew runs query on conn, planned as planning (a statement) sets, in
// a transaction it rolls back, and fails t unless it returned a row having read a
// few index entries of table and no rows of it by a scan (and a row, if wantRow).
func checkReadsFew(t *testing.T, conn *pgx.Conn, table, query string, args []any, name, planning string, wantRow bool) {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, planning); err != nil {
		t.Fatal(err)
	}
	entries0, scanned0 := tableRead(t, tx, table)
	rows, err := tx.Query(ctx, query, args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	got := 0
	for rows.Next() {
		got++
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	entries, scanned := tableRead(t, tx, table)
	entries, scanned = entries-entries0, scanned-scanned0
	if wantRow && got == 0 {
		t.Errorf("%s (%s): no row", name, planning)
	}
	if entries+scanned > 100 {
		t.Errorf("%s (%s) read %d index entries and %d rows of %s by a scan, want a probe (a few)",
			name, planning, entries, scanned, table)
	}
}

// tableRead is what tx's session has read of table so far (the counters of its
// transactions not yet sent to the statistics): index entries over all of its
// indexes, and rows by sequential scans.
func tableRead(t *testing.T, tx pgx.Tx, table string) (entries, scanned int64) {
	t.Helper()
	if err := tx.QueryRow(context.Background(), `SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0),
		pg_stat_get_xact_tuples_returned($1::regclass) FROM pg_index WHERE indrelid = $1::regclass`, table).Scan(&entries, &scanned); err != nil {
		t.Fatal(err)
	}
	return entries, scanned
}

// A claim of several finds its owners' reservations through todos_reserved,
// planned as a pipelined batch plans it, when one owner holds a quarter of the
// todos as reservations: a generic plan left to itself read all of todos.
func TestAClaimOfSeveralFindsReservationsByTheirIndex(t *testing.T) {
	s := pgSeeded(t, "bench", 20000)
	ctx := context.Background()
	conn := statsConn(t, s, "todos", "none")
	now := ms(s.now())
	if _, err := conn.Exec(ctx, `UPDATE todos SET reserved_for = 'agent:z', available_at = $1 WHERE id % 4 = 0`, now+3600000); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE todos`); err != nil {
		t.Fatal(err)
	}
	ttl := time.Minute.Milliseconds()
	set := [][]any{{"bench", "agent:a", ttl, int64(0), int64(0)}, {"bench", "agent:b", ttl, int64(0), int64(0)}}
	checkReadsFew(t, conn, "todos", s.q(pgClaimSet), pgClaimSetKind.args(now, set), "a claim of several", pipelinePlans, true)
}
