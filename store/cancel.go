package store

import (
	"context"
	"fmt"
)

// CancelTodo ends a pending or claimed todo on a human's word. It goes to state
// failed, never claimed or retried by itself again, and cancelled_by tells it
// apart from a dead letter (RetryFailed passes it by; Retry of it by id is a
// human's choice). A worker that held it hears so at its next heartbeat,
// complete, fail or release: conflict, "it was cancelled by …".
func (s *Store) CancelTodo(ctx context.Context, id int64, actor string) (Todo, error) {
	var t Todo
	err := s.write(ctx, func(w *wtx) error {
		c, err := w.notCancelled(id, "cancel")
		if err != nil {
			return err
		}
		if c.state != StatePending && c.state != StateClaimed {
			return fmt.Errorf("store: cancel todo %d: it is %s; only a pending or claimed todo can be cancelled: %w",
				id, c.state, ErrConflict)
		}
		t, err = scanTodo(w.queryRow(`UPDATE todos SET state = 'failed', owner = NULL, lease_expires_at = NULL,
				reserved_for = NULL, cancelled_by = ?, last_error = ?, updated_at = ?, finished_at = ?
			WHERE id = ? RETURNING `+todoColumns, actor, "cancelled by "+actor, ms(w.now), ms(w.now), id), false)
		if err != nil {
			return fmt.Errorf("store: cancel todo %d: %w", id, err)
		}
		w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StateFailed, Source: t.Source.Type, Cause: "cancel"})
		detail := "was " + c.state
		if c.owner != "" {
			detail += ", held by " + c.owner
		}
		if err := w.audit(actor, "todo.cancel", todoTarget(id), "", detail); err != nil {
			return err
		}
		return w.keyEnded(t)
	})
	return t, err
}

// notCancelled reads the todo id under its lock, as a human's act on it
// (verb) does, and refuses one that was cancelled.
func (w *wtx) notCancelled(id int64, verb string) (curTodo, error) {
	c, err := w.current(Ack{ID: id})
	if err == nil && c.cancelledBy != "" {
		err = fmt.Errorf("store: %s todo %d: it was cancelled by %s: %w", verb, id, c.cancelledBy, ErrConflict)
	}
	return c, err
}
