package store

import (
	"context"
	"fmt"
)

// AddTodo puts a todo on a queue.
func (s *Store) AddTodo(ctx context.Context, n NewTodo) (Todo, error) {
	var t Todo
	// It sets t afresh on each run: it may run again (rerunReq).
	err := s.submit(ctx, rerunReq(ctx, func(w *wtx) error {
		var err error
		t, err = w.addTodo(n)
		return err
	}))
	return t, err
}

// addTodo inserts a todo inside a write; ingestion reuses it in the same transaction
// as its event. With a key and Coalesce it may fold into the key's pending todo
// instead (the result's Folded says so).
func (w *wtx) addTodo(n NewTodo) (Todo, error) {
	if !ValidQueueName(n.Queue) {
		return Todo{}, fmt.Errorf("store: add todo: queue %q: %w", n.Queue, ErrInvalid)
	}
	if err := n.Options.Validate(); err != nil {
		return Todo{}, err
	}
	if n.MaxAttempts <= 0 {
		n.MaxAttempts = DefaultMaxAttempts
	}
	if n.Source.Type == "" {
		n.Source.Type = "manual"
	}
	if n.Trust.Mode == "" {
		n.Trust.Mode = "none"
	}
	if n.CreatedBy == "" {
		n.CreatedBy = "system"
	}
	size := len(n.Payload)
	if n.size > 0 {
		size = n.size
	}
	o := n.Options
	waiting := false
	if o.Key != "" {
		if o.Coalesce {
			t, ok, err := w.fold(n, size)
			if err != nil || ok {
				t.Folded = ok
				return t, err
			}
		}
		var err error
		if waiting, err = w.keyHasFront(n.Queue, o.Key); err != nil {
			return Todo{}, err
		}
	}
	available := o.firstAvailable(w.now)
	// Exec and the rowid SQLite reports, not RETURNING: on this, the ingest's
	// hottest statement, RETURNING's result set cost a third as much again.
	insertTodo := `INSERT INTO todos (id, queue, state, payload_size, source_type, source_webhook_id,
			source_event_id, source_event_type, verified, trust_mode, webhook_created_by, created_by,
			max_attempts, available_at, created_at, updated_at, key, key_waiting, priority)
		VALUES (?, ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	if w.w.s.pg {
		// An identity column takes no NULL: an id not taken ahead comes from its sequence.
		insertTodo = pgInsertTodo
	}
	now := ms(w.now)
	args := []any{nullID(n.id), n.Queue, size, n.Source.Type, nullID(n.Source.WebhookID), nullID(n.Source.EventID),
		n.Source.EventType, boolInt(n.Trust.Verified), n.Trust.Mode, n.Trust.WebhookCreatedBy, n.CreatedBy,
		n.MaxAttempts, ms(available), now, now, nullString(o.Key), boolInt(waiting), o.Priority}
	id := n.id
	var err error
	if id != 0 && w.w.s.pg {
		// Its id taken ahead, nothing of its answer is read: sent later (wtxlater.go).
		err = w.later("store: add todo to "+n.Queue, insertTodo, args...)
	} else {
		id, err = w.insert(insertTodo, args...)
		if err != nil {
			err = fmt.Errorf("store: add todo to %s: %w", n.Queue, err)
		}
	}
	if err != nil {
		return Todo{}, err
	}
	// A todo made from a webhook event reads its payload from the event's body.
	if err := w.insertPayload(id, n); err != nil {
		return Todo{}, err
	}
	if err := w.audit(n.CreatedBy, "todo.add", todoTarget(id), "", "queue="+n.Queue); err != nil {
		return Todo{}, err
	}
	if waiting {
		w.changed(TodoChange{ID: id, Queue: n.Queue, State: StatePending, Source: n.Source.Type, Cause: "add"})
	} else {
		w.announcePending(id, n.Queue, n.Source.Type, available, "add")
	}
	return Todo{
		ID: id, Queue: n.Queue, State: StatePending, PayloadSize: size, Source: n.Source, Trust: n.Trust,
		CreatedBy: n.CreatedBy, MaxAttempts: n.MaxAttempts, AvailableAt: available, CreatedAt: w.now, UpdatedAt: w.now,
		Key: o.Key, KeyWaiting: waiting, Priority: o.Priority,
	}, nil
}

// pgInsertTodo is addTodo's INSERT on PostgreSQL.
const pgInsertTodo = `INSERT INTO todos (id, queue, state, payload_size, source_type, source_webhook_id,
			source_event_id, source_event_type, verified, trust_mode, webhook_created_by, created_by,
			max_attempts, available_at, created_at, updated_at, key, key_waiting, priority)
		VALUES (coalesce(?, nextval('todos_id_seq')), ?, 'pending', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
