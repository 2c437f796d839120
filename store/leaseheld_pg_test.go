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
