package store

import (
	"context"
	"database/sql"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// On a queue filled faster than PostgreSQL's statistics follow (a burst of adds,
// the table not analysed since), a claim still finds a worker's reserved todo
// through todos_reserved, not by reading every pending todo of the queue on each
// claim; so do claims of several.
func TestClaimFindsReservationsByTheirIndex(t *testing.T) {
	for _, stats := range statsKinds {
		t.Run(stats, func(t *testing.T) {
			s := pgStore(t)
			ctx := context.Background()
			conn := statsConn(t, s, "todos", stats)
			queues := []string{"bench"}
			addTodos(t, s, "bench", 1)
			td, _, err := s.ClaimNext(ctx, "agent:a", queues, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			ack := Ack{ID: td.ID, Owner: "agent:a", LeaseSeq: td.LeaseSeq, Queues: queues}
			if _, err := s.RequestApproval(ctx, ack, "ship it?"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Decide(ctx, ack.ID, true, "yes", "human:1"); err != nil {
				t.Fatal(err)
			}
			if err := s.SeedTodosForBench(ctx, "bench", 5000, "x"); err != nil {
				t.Fatal(err)
			}
			now := ms(s.now())
			ttl := time.Minute.Milliseconds()
			set := [][]any{{"bench", "agent:a", ttl, int64(0), int64(0)}, {"bench", "agent:b", ttl, int64(0), int64(0)}}
			for _, planning := range []string{customPlans, genericPlans, pipelinePlans} {
				for range runsToKeepAPlan + 1 {
					checkReadsFew(t, conn, "todos", s.q(pgClaimGated), pgClaimGatedArgs("bench", "agent:a", time.Minute, 0, 0, now),
						"a claim of a reserved todo", planning, true)
					checkReadsFew(t, conn, "todos", s.q(pgClaimSet), pgClaimSetKind.args(now, set),
						"claims of several, one of them of a reserved todo", planning, true)
				}
			}
		})
	}
}

// The claim function runs with JIT off whoever calls it: with sorting off in it,
// the sorts of its reservations' part look dear enough for JIT, which compiled
// them on each run (0.3 s a claim on a connection with jit on).
func TestTheClaimFunctionCompilesNothing(t *testing.T) {
	s := pgStore(t)
	var list string
	if err := s.rdb.QueryRowContext(context.Background(), `SELECT coalesce(array_to_string(proconfig, ','), '') FROM pg_proc
		WHERE proname = 'todos_lock_claims' AND pronamespace = current_schema()::regnamespace`).Scan(&list); err != nil {
		t.Fatal(err)
	}
	if config := strings.Split(list, ","); !slices.Contains(config, "jit=off") {
		t.Errorf("todos_lock_claims runs with %v, want jit=off among them", config)
	}
}

// planText reads the rows of an EXPLAIN as its text, a line each.
func planText(rows *sql.Rows, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return "", err
		}
		plan = append(plan, line)
	}
	return strings.Join(plan, "\n"), rows.Err()
}

// pgStore opens a store on a new PostgreSQL schema.
func pgStore(t *testing.T) *Store {
	t.Helper()
	return pgProcesses(t, testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))[0]
}

// pgSeeded is pgStore with queue filled with n pending todos (SeedTodosForBench).
func pgSeeded(t *testing.T, queue string, n int) *Store {
	t.Helper()
	s := pgStore(t)
	if err := s.SeedTodosForBench(context.Background(), queue, n, "x"); err != nil {
		t.Fatal(err)
	}
	return s
}

// A claim locks only the reserved todos it takes: one claim by a worker with
// 2,000 reservations locked all 2,000 (and wrote each to the log) until its
// transaction ended, as did a claim of several.
func TestAClaimLocksOnlyTheReservationsItTakes(t *testing.T) {
	s := pgStore(t)
	conn := statsConn(t, s, "todos", "none")
	ctx := context.Background()
	now := ms(s.now())
	if err := s.SeedTodosForBench(ctx, "bench", 2000, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE todos SET reserved_for = 'agent:z', available_at = $1`, now+3600000); err != nil {
		t.Fatal(err)
	}
	ttl := time.Minute.Milliseconds()
	for _, c := range []struct {
		name  string
		query string
		args  []any
		want  int64
	}{
		{"a claim of one", pgClaimGated, pgClaimGatedArgs("bench", "agent:z", time.Minute, 0, 0, now), 1},
		{"two claims of several by the worker, one by another", pgClaimSet, pgClaimSetKind.args(now, [][]any{
			{"bench", "agent:z", ttl, int64(0), int64(0)}, {"bench", "agent:y", ttl, int64(0), int64(0)},
			{"bench", "agent:z", ttl, int64(0), int64(0)}}), 2},
	} {
		tx, err := conn.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rows, err := tx.Query(ctx, s.q(c.query), c.args...)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		rows.Close()
		var locked int64
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM todos WHERE xmax::text = pg_current_xact_id()::text`).Scan(&locked); err != nil {
			t.Fatal(err)
		}
		tx.Rollback(ctx)
		if locked != c.want {
			t.Errorf("%s locked or changed %d todos, want %d", c.name, locked, c.want)
		}
	}
}
