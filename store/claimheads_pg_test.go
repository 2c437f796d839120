package store

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/switchboardhq/switchboard/internal/testkit"
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
	for _, stats := range []string{"none", "taken while empty"} {
		t.Run(stats, func(t *testing.T) {
			clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			s := pgProcesses(t, clock)[0]
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, s.dsn)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close(ctx)
			// autovacuum would analyse the table in its own time: not here.
			if _, err := conn.Exec(ctx, `ALTER TABLE todos SET (autovacuum_enabled = off)`); err != nil {
				t.Fatal(err)
			}
			if stats != "none" {
				if _, err := conn.Exec(ctx, `ANALYZE todos`); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.SeedTodosForBench(ctx, "bench", pending, "x"); err != nil {
				t.Fatal(err)
			}
			now := ms(s.now())
			ttl := time.Minute
			owner := "agent:a"
			set := [][]any{{"bench", "agent:a", ttl.Milliseconds(), int64(0), int64(0)},
				{"bench", "agent:b", ttl.Milliseconds(), int64(0), int64(0)},
				{"bench", "agent:c", ttl.Milliseconds(), int64(0), int64(0)}}
			for _, c := range []struct {
				name  string
				query string
				args  []any
			}{
				{"the head, read", pgHead, pgHeadArgs("bench", now)},
				{"a claim of one queue's head", pgClaimHead, append(pgHeadArgs("bench", now), owner, now+ttl.Milliseconds(), now, now, owner)},
				{"a claim of one", pgClaimGated, pgClaimGatedArgs("bench", owner, ttl, 0, 0, now)},
				{"a claim of several", pgClaimSet, pgClaimSetKind.args(now, set)},
				{"the board's heads", pgQueueHeads, []any{now}},
			} {
				for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
					checkReadsAHead(t, conn, s.q(c.query), c.args, c.name+" ("+mode+")", mode, pending)
				}
			}
		})
	}
}

// checkReadsAHead runs query on conn, planned as mode says (plan_cache_mode), in
// a transaction it rolls back, and fails t unless it returned a row having read
// a few index entries of todos and no rows by a scan.
func checkReadsAHead(t *testing.T, conn *pgx.Conn, query string, args []any, name, mode string, pending int) {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT set_config('plan_cache_mode', $1, true)`, mode); err != nil {
		t.Fatal(err)
	}
	entries0, scanned0 := todosRead(t, tx)
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
	entries, scanned := todosRead(t, tx)
	entries, scanned = entries-entries0, scanned-scanned0
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if got == 0 {
		t.Errorf("%s: no row, want the head of a queue of %d", name, pending)
	}
	if entries+scanned > 100 {
		t.Errorf("%s read %d index entries and %d rows of todos by a scan, want a probe of todos_ready (a few)",
			name, entries, scanned)
	}
}

// todosRead is what tx's session has read of todos so far (the counters of its
// transactions not yet sent to the statistics): index entries over all of
// todos' indexes, and rows by sequential scans.
func todosRead(t *testing.T, tx pgx.Tx) (entries, scanned int64) {
	t.Helper()
	if err := tx.QueryRow(context.Background(), `SELECT coalesce(sum(pg_stat_get_xact_tuples_returned(indexrelid)), 0),
		pg_stat_get_xact_tuples_returned('todos'::regclass) FROM pg_index WHERE indrelid = 'todos'::regclass`).Scan(&entries, &scanned); err != nil {
		t.Fatal(err)
	}
	return entries, scanned
}
