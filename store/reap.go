package store

import (
	"context"
	"fmt"
)

// ReapResult counts what one reaper pass did.
type ReapResult struct {
	Requeued     int
	DeadLettered int
}

// expiredLease is a claimed todo whose lease has expired, as the reaper found it.
type expiredLease struct {
	id            int64
	attempts, max int
}

// ReapExpired requeues every claimed todo whose lease has expired, or dead-letters it
// when its attempts are used up. It works in bounded chunks so one pass never holds
// the writer for long.
func (s *Store) ReapExpired(ctx context.Context) (ReapResult, error) {
	var total ReapResult
	for {
		var r ReapResult
		more := false
		err := s.write(ctx, func(w *wtx) error {
			r = ReapResult{} // a write may run again (see write)
			query := `SELECT id, attempts, max_attempts FROM todos INDEXED BY todos_leases
				WHERE state = 'claimed' AND lease_expires_at <= ? ORDER BY lease_expires_at LIMIT 500`
			if w.w.s.pg {
				// Each expired lease locked before it is reaped. PostgreSQL checks
				// state and expiry again on the row as it is under the lock, so a
				// heartbeat or complete that committed first keeps its todo; one
				// that holds the row now is skipped, its todo left for the next
				// pass if its lease is still expired then.
				query += ` FOR UPDATE SKIP LOCKED`
			}
			rows, err := w.query(query, ms(w.now))
			if err != nil {
				return fmt.Errorf("store: find expired leases: %w", err)
			}
			var list []expiredLease
			for rows.Next() {
				var e expiredLease
				if err := rows.Scan(&e.id, &e.attempts, &e.max); err != nil {
					rows.Close()
					return fmt.Errorf("store: find expired leases: %w", err)
				}
				list = append(list, e)
			}
			rows.Close()
			more = len(list) == 500
			for _, e := range list {
				if err := w.reapOne(e, &r); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total.Requeued += r.Requeued
		total.DeadLettered += r.DeadLettered
		if !more {
			return total, nil
		}
	}
}

// reapOne requeues the todo of an expired lease, or dead-letters it when its
// attempts are used up, and counts it in r.
func (w *wtx) reapOne(e expiredLease, r *ReapResult) error {
	id, attempts, max := e.id, e.attempts, e.max
	var t Todo
	var err error
	if attempts >= max {
		t, err = scanTodo(w.queryRow(`UPDATE todos SET state = 'failed', owner = NULL, lease_expires_at = NULL,
				last_error = ?, updated_at = ?, finished_at = ?
			WHERE id = ? RETURNING `+todoColumns,
			fmt.Sprintf("lease expired on attempt %d of %d", attempts, max), ms(w.now), ms(w.now), id), false)
		if err == nil {
			r.DeadLettered++
			w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StateFailed, Source: t.Source.Type, Cause: "dead_letter"})
			err = w.audit("system", "todo.dead_letter", todoTarget(id), "", "lease expired")
		}
		if err == nil {
			err = w.keyEnded(t)
		}
	} else {
		t, err = scanTodo(w.queryRow(`UPDATE todos SET state = 'pending', owner = NULL, lease_expires_at = NULL,
				last_error = 'lease expired', available_at = ?, updated_at = ?
			WHERE id = ? RETURNING `+todoColumns, ms(w.now), ms(w.now), id), false)
		if err == nil {
			r.Requeued++
			err = w.requeued(TodoChange{ID: t.ID, Queue: t.Queue, State: StatePending, Source: t.Source.Type,
				Claimable: true, Cause: "lease_expired"}, "system", "todo.requeue", "lease expired")
		}
	}
	if err != nil {
		return fmt.Errorf("store: reap todo %d: %w", id, err)
	}
	return nil
}
