package store

import (
	"context"
	"fmt"
	"time"
)

// The charts and the Webhooks page's delivery counts both count the events stored
// since a mark: every event with a larger id. That needs a settled mark, one at or
// below which no event can still appear. On SQLite the writer is alone and takes
// ids inside its serial writes, so the newest id is settled. On PostgreSQL several
// processes take ids from a sequence and commit in any order: an event with a
// smaller id can commit after one with a larger id was read, and a mark past it
// would skip it for good. There every delivery holds pgEventsLock, shared, from
// before its event takes an id until it commits (see pgLockDeliveryKeys), and
// settledEvents reads how far the sequence has gone, then waits for the
// transactions that held the lock at that moment to end: every id given out by
// then is committed or rolled back. Nothing waits on a delivery, and no delivery
// waits on the count.

// pgEventsLock is the shared lock a delivery holds while its event may be
// uncommitted; one per schema (the tests run one each).
const pgEventsLock = `pg_advisory_xact_lock_shared(1398227540, hashtext(current_schema()))`

// pgEventWriters lists, comma-separated, the transactions holding pgEventsLock.
const pgEventWriters = `SELECT coalesce(string_agg(virtualtransaction, ','), '') FROM pg_locks
	WHERE locktype = 'advisory' AND classid = 1398227540 AND objid = CAST(hashtext(current_schema()) AS oid)
		AND objsubid = 2 AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`

// settleWait bounds how long settledEvents waits for deliveries in flight.
const settleWait = 10 * time.Second

// settledEvents returns a mark at or below which every event that will ever be
// stored is stored and visible, and settled=false when deliveries holding ids up
// to that mark were still uncommitted after settleWait (the mark is then only
// the sequence's, and a caller that counts should keep its old one).
func (s *Store) settledEvents(ctx context.Context) (mark int64, settled bool, err error) {
	if !s.pg {
		err := s.queryRow(ctx, `SELECT coalesce(max(id), 0) FROM webhook_events`).Scan(&mark)
		return mark, err == nil, err
	}
	var called bool
	if err := s.rdb.QueryRowContext(ctx, `SELECT last_value, is_called FROM webhook_events_id_seq`).Scan(&mark, &called); err != nil {
		return 0, false, fmt.Errorf("read the event id sequence: %w", err)
	}
	if !called {
		mark-- // last_value is the next id to give out
	}
	var writers string
	if err := s.rdb.QueryRowContext(ctx, pgEventWriters).Scan(&writers); err != nil {
		return 0, false, fmt.Errorf("list the deliveries in flight: %w", err)
	}
	deadline := time.Now().Add(settleWait)
	for wait := time.Millisecond; writers != ""; wait = min(2*wait, 100*time.Millisecond) {
		if time.Now().After(deadline) {
			return mark, false, nil
		}
		select {
		case <-ctx.Done():
			return 0, false, ctx.Err()
		case <-time.After(wait):
		}
		err := s.rdb.QueryRowContext(ctx, `SELECT coalesce(string_agg(virtualtransaction, ','), '') FROM pg_locks
			WHERE virtualtransaction = ANY (string_to_array($1, ',')) AND locktype = 'advisory'
				AND classid = 1398227540 AND objsubid = 2`, writers).Scan(&writers)
		if err != nil {
			return 0, false, fmt.Errorf("wait for the deliveries in flight: %w", err)
		}
	}
	return mark, true, nil
}
