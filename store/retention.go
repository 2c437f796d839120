package store

import (
	"context"
	"fmt"
	"time"
)

// Retention: what the reaper deletes once it has served its time. Deletes run
// in short chunks and each leaves an audit row.

// PruneDone deletes done todos finished before cutoff, in bounded chunks, and
// returns how many went. The newest todo is never deleted: ids are max(id)+1, so
// keeping it keeps an id from being handed out twice (audit rows and agents hold
// todo ids).
func (s *Store) PruneDone(ctx context.Context, cutoff time.Time) (int64, error) {
	return s.prune(ctx, "done todos", "todo.prune", 1000, `DELETE FROM todos WHERE id IN (
		SELECT id FROM todos INDEXED BY todos_finished
		WHERE state = 'done' AND finished_at < ? AND id < (SELECT max(id) FROM todos) LIMIT 1000)`, ms(cutoff))
}

// ReplayWindow is how long a delivery's replay key (a hash of what its provider
// signed, see NewDelivery.ReplayKey) makes the same signed bytes a redelivery, and
// so the least time an event is kept after it arrived, whatever cutoff PruneEvents
// is given. It must outlive every replay that a signed timestamp still lets through
// (up to the ingest tolerance, 300 s, ahead when it arrives and accepted until the
// tolerance after it); for schemes that sign no timestamp (GitHub, generic) it is
// the whole defence against a captured delivery sent again, and a producer that
// sends the very same body twice within it gets one todo.
const ReplayWindow = time.Hour

// PruneEvents deletes webhook events received before cutoff (and at least
// ReplayWindow ago) that no todo needs any more: their own todo was pruned (or
// never existed) and no live replay reads its payload from them. It works in
// bounded chunks and returns how many went. A redelivery of a pruned event is
// accepted as new. Like PruneDone, it never deletes the newest event, so no event
// id is handed out twice.
func (s *Store) PruneEvents(ctx context.Context, cutoff time.Time) (int64, error) {
	if latest := s.Now().Add(-ReplayWindow); cutoff.After(latest) {
		cutoff = latest
	}
	return s.prune(ctx, "webhook events", "webhook_event.prune", 500, `DELETE FROM webhook_events WHERE id IN (
		SELECT e.id FROM webhook_events e INDEXED BY webhook_events_orphaned
		WHERE e.todo_id IS NULL AND e.received_at < ? AND e.id < (SELECT max(id) FROM webhook_events)
		  AND NOT EXISTS (SELECT 1 FROM todos t INDEXED BY todos_replays
		                  WHERE t.source_type = 'replay' AND t.source_event_id = e.id)
		ORDER BY e.received_at LIMIT 500)`, ms(cutoff))
}

// prune runs a DELETE of at most chunk rows, one write each, until a run deletes
// fewer: short writes, so ingest and agents are never held up behind a big purge.
func (s *Store) prune(ctx context.Context, what, action string, chunk int64, del string, args ...any) (int64, error) {
	var total int64
	for {
		var n int64
		err := s.write(ctx, func(w *wtx) error {
			res, err := w.exec(del, args...)
			if err != nil {
				return fmt.Errorf("store: prune %s: %w", what, err)
			}
			n, _ = res.RowsAffected()
			if n > 0 {
				return w.audit("system", action, "", "", fmt.Sprintf("deleted=%d", n))
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		total += n
		if n < chunk {
			return total, nil
		}
	}
}
