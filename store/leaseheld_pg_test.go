package store

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
	claimRaw(t, conn, 20, 0, now+60000)
	if _, err := conn.Exec(ctx, `ANALYZE todos`); err != nil {
		t.Fatal(err)
	}
	id := claimRaw(t, conn, 3000, 20, now+60000)
	a := Ack{ID: id, Owner: "agent:a", LeaseSeq: 1}
	for _, planning := range planModes {
		checkReadsFew(t, conn, "todos", s.q(pgComplete), pgCompleteArgs(a, "", now), "a complete", planning, true)
	}
}

// Acknowledgements planned while todos is empty, as on a new install, and the
// plans kept for the connection's life, still find their todos by id once there
// are 40,000: those of pipelined batches as the batch plans them, and those that
// run outside batches (a heartbeat, a release, a fail, a complete run again on
// its own) as the writer plans any write, by custom plans and by a generic one.
// With such plans (and statistics taken while the table was empty) a complete
// in a batch read all of todos_pkey to find the todos it changed, a complete of
// several twice; outside batches, before the writer planned without sequential
// scans, each heartbeat, release, fail or complete read the whole table until
// autovacuum analysed it.
func TestAcksPlannedOnAnEmptyTableFindTheirTodosById(t *testing.T) {
	for _, stats := range statsKinds {
		t.Run(stats, func(t *testing.T) { acksPlannedOnAnEmptyTable(t, stats) })
	}
}

func acksPlannedOnAnEmptyTable(t *testing.T, stats string) {
	s := pgStore(t)
	ctx := context.Background()
	conn := statsConn(t, s, "todos", stats)
	now := ms(s.now())
	pipelined := []string{pipelinePlans}
	acks := func(a Ack) []plannedStatement {
		set := [][]any{{a.ID, a.Owner, a.LeaseSeq, "", []string(nil)}, {a.ID - 1, a.Owner, a.LeaseSeq, "", []string(nil)}}
		return []plannedStatement{
			{"a complete", pgComplete, pgCompleteArgs(a, "", now), slices.Concat(writerPlans, pipelined)},
			{"a complete of several", pgCompleteSet, pgCompleteSetKind.args(now, set), pipelined},
			{"a heartbeat", pgHeartbeat, pgHeartbeatArgs(a, time.Minute, s.now()), writerPlans},
			{"a release", pgRelease, pgReleaseArgs(a, now), writerPlans},
			{"a fail", pgFail, pgFailArgs(a, "boom", true, now), writerPlans},
		}
	}
	a := Ack{ID: 2, Owner: "agent:a", LeaseSeq: 1}
	for _, c := range acks(a) {
		for _, planning := range c.plannings {
			for range runsToKeepAPlan {
				checkReadsFew(t, conn, "todos", s.q(c.query), c.args, c.name, planning, false)
			}
		}
	}
	if err := s.SeedTodosForBench(ctx, "bench", 40000, "x"); err != nil {
		t.Fatal(err)
	}
	a.ID = claimRaw(t, conn, 3000, 0, now+60000)
	for _, c := range acks(a) {
		for _, planning := range c.plannings {
			checkReadsFew(t, conn, "todos", s.q(c.query), c.args, c.name, planning, true)
		}
	}
}

// claimRaw marks n todos, in id order after the first skip, claimed by agent:a
// at lease_seq 1 until expires (unix ms), as a claim would leave them, and
// returns the highest id so claimed.
func claimRaw(t *testing.T, conn *pgx.Conn, n, skip int, expires int64) int64 {
	t.Helper()
	var last int64
	if err := conn.QueryRow(context.Background(), `WITH c AS (UPDATE todos SET state = 'claimed', owner = 'agent:a', lease_seq = 1, lease_expires_at = $1
		WHERE id IN (SELECT id FROM todos ORDER BY id LIMIT $2 OFFSET $3) RETURNING id) SELECT max(id) FROM c`,
		expires, n, skip).Scan(&last); err != nil {
		t.Fatal(err)
	}
	return last
}
