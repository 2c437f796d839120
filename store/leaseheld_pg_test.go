package store

import (
	"context"
	"testing"
)

// An acknowledgement on PostgreSQL finds its todo by id, whatever the statistics
// of todos say. With statistics taken when few todos were claimed, PostgreSQL
// read every lease (todos_leases) for each complete: 3,020 index entries at 3,020
// leases.
func TestAnAckFindsItsTodoByIdWhateverTheStatistics(t *testing.T) {
	s := pgSeeded(t, "bench", 4000)
	ctx := context.Background()
	conn := statsConn(t, s, "todos", "none")
	now := ms(s.now())
	claim := func(n, skip int) {
		t.Helper()
		if _, err := conn.Exec(ctx, `UPDATE todos SET state = 'claimed', owner = 'agent:a', lease_seq = 1, lease_expires_at = $1
			WHERE id IN (SELECT id FROM todos ORDER BY id LIMIT $2 OFFSET $3)`, now+60000, n, skip); err != nil {
			t.Fatal(err)
		}
	}
	claim(20, 0)
	if _, err := conn.Exec(ctx, `ANALYZE todos`); err != nil {
		t.Fatal(err)
	}
	claim(3000, 20)
	var id int64
	if err := conn.QueryRow(ctx, `SELECT max(id) FROM todos WHERE state = 'claimed'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	a := Ack{ID: id, Owner: "agent:a", LeaseSeq: 1}
	for _, planning := range planModes {
		checkReadsFew(t, conn, "todos", s.q(pgComplete), pgCompleteArgs(a, "", now), "a complete", planning, true)
	}
}

// Acknowledgements planned as a pipelined batch plans them while todos is
// empty, as on a new install, and the plans kept for the connection's life,
// still find their todos by id once there are 40,000: with such plans (and
// statistics taken while the table was empty) a complete read all of todos_pkey
// to find the todos it changed, and a complete of several twice.
func TestPipelinedAcksPlannedOnAnEmptyTableFindTheirTodosById(t *testing.T) {
	for _, stats := range []string{"none", "taken while empty"} {
		t.Run(stats, func(t *testing.T) { pipelinedAcksPlannedOnAnEmptyTable(t, stats) })
	}
}

func pipelinedAcksPlannedOnAnEmptyTable(t *testing.T, stats string) {
	s := pgSeeded(t, "other", 0)
	ctx := context.Background()
	conn := statsConn(t, s, "todos", stats)
	now := ms(s.now())
	complete := func(a Ack) []any { return pgCompleteArgs(a, "", now) }
	set := func(a Ack) []any {
		return pgCompleteSetKind.args(now, [][]any{{a.ID, a.Owner, a.LeaseSeq, "", []string(nil)}, {a.ID - 1, a.Owner, a.LeaseSeq, "", []string(nil)}})
	}
	a := Ack{ID: 2, Owner: "agent:a", LeaseSeq: 1}
	for range 6 {
		checkReadsFew(t, conn, "todos", s.q(pgComplete), complete(a), "a complete", pipelinePlans, false)
		checkReadsFew(t, conn, "todos", s.q(pgCompleteSet), set(a), "a complete of several", pipelinePlans, false)
	}
	if err := s.SeedTodosForBench(ctx, "bench", 40000, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `UPDATE todos SET state = 'claimed', owner = 'agent:a', lease_seq = 1, lease_expires_at = $1
		WHERE id IN (SELECT id FROM todos ORDER BY id LIMIT 3000)`, now+60000); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := conn.QueryRow(ctx, `SELECT max(id) FROM todos WHERE state = 'claimed'`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	a.ID = id
	checkReadsFew(t, conn, "todos", s.q(pgComplete), complete(a), "a complete", pipelinePlans, true)
	checkReadsFew(t, conn, "todos", s.q(pgCompleteSet), set(a), "a complete of several", pipelinePlans, true)
}
