package store

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Pausing a queue is a human's act (the board, the CLI): its todos stay where
// they are and are not claimable until it is resumed; deliveries and adds still
// land on it. Claims read the paused list in their own transaction (claimGate),
// so a pause holds from its commit on, in every process on the database.

// PausedQueue is a queue a human paused.
type PausedQueue struct {
	Queue    string    `json:"queue"`
	PausedBy string    `json:"paused_by"`
	PausedAt time.Time `json:"paused_at"`
}

// PauseQueue pauses queue q. Pausing a paused queue is a conflict: the first
// pause, and who made it, stand.
func (s *Store) PauseQueue(ctx context.Context, q, actor string) error {
	if !ValidQueueName(q) {
		return fmt.Errorf("store: pause queue %q: %w", q, ErrInvalid)
	}
	return s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`INSERT OR IGNORE INTO paused_queues (queue, paused_by, paused_at) VALUES (?, ?, ?)`,
			q, actor, ms(w.now))
		if err != nil {
			return fmt.Errorf("store: pause queue %s: %w", q, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: pause queue %s: it is paused already: %w", q, ErrConflict)
		}
		return w.audit(actor, "queue.pause", "queue:"+q, "", "")
	})
}

// ResumeQueue resumes the paused queue q, and rings the doorbell for its head.
func (s *Store) ResumeQueue(ctx context.Context, q, actor string) error {
	if !ValidQueueName(q) {
		return fmt.Errorf("store: resume queue %q: %w", q, ErrInvalid)
	}
	return s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`DELETE FROM paused_queues WHERE queue = ?`, q)
		if err != nil {
			return fmt.Errorf("store: resume queue %s: %w", q, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: resume queue %s: it is not paused: %w", q, ErrConflict)
		}
		head, found, err := w.queueHead(q, ms(w.now))
		if err != nil {
			return err
		}
		if !found {
			return w.audit(actor, "queue.resume", "queue:"+q, "", "")
		}
		// Announced as the head's return to the queue: the doorbell rings here, and
		// another process's serve hears of it through this audit row (see
		// WatchForeign's returnCauses).
		return w.requeued(TodoChange{ID: head.id, Queue: q, State: StatePending, Claimable: true, Cause: "resume"},
			actor, "queue.resume", "queue="+q)
	})
}

// PausedQueues lists the paused queues, by name.
func (s *Store) PausedQueues(ctx context.Context) ([]PausedQueue, error) {
	rows, err := s.query(ctx, `SELECT queue, paused_by, paused_at FROM paused_queues ORDER BY queue`)
	if err != nil {
		return nil, fmt.Errorf("store: list paused queues: %w", err)
	}
	defer rows.Close()
	out := []PausedQueue{}
	for rows.Next() {
		var p PausedQueue
		var at int64
		if err := rows.Scan(&p.Queue, &p.PausedBy, &at); err != nil {
			return nil, fmt.Errorf("store: list paused queues: %w", err)
		}
		p.PausedAt = fromMS(at)
		out = append(out, p)
	}
	return out, rows.Err()
}

// claimGate is what a claim reads before it looks at any queue, in one
// statement: the paused queues, and the oldest todo reserved for owner whose
// reservation still runs (see Decide) on one of the claim's queues that is not
// paused, or 0. The claim's queues are one argument (SQLite: a JSON array).
const (
	claimGate = `SELECT coalesce((SELECT group_concat(queue, char(10)) FROM paused_queues), ''),
		coalesce((SELECT id FROM todos INDEXED BY todos_reserved
			WHERE reserved_for = ? AND state = 'pending' AND available_at > ?
				AND queue NOT IN (SELECT queue FROM paused_queues)
				AND queue IN (SELECT value FROM json_each(?)) ORDER BY id LIMIT 1), 0)`
	pgClaimGate = `SELECT coalesce((SELECT string_agg(queue, chr(10)) FROM paused_queues), ''),
		coalesce((SELECT id FROM todos
			WHERE reserved_for = ? AND state = 'pending' AND available_at > ?
				AND queue NOT IN (SELECT queue FROM paused_queues) AND queue = ANY(?) ORDER BY id LIMIT 1), 0)`
)

// gate reads claimGate for owner: the queues of queues that are not paused, and
// the id of the oldest todo reserved for owner on one of them, or 0. A worker's
// reservations on queues this claim does not ask for, or that are paused, wait
// for a claim that does.
func (w *wtx) gate(owner string, queues []string) (open []string, reserved int64, err error) {
	query, args := pgClaimGate, []any{owner, ms(w.now), queues}
	if !w.w.s.pg {
		list, err := json.Marshal(orEmpty(queues))
		if err != nil {
			return nil, 0, fmt.Errorf("store: claim next: %w", err)
		}
		query, args = claimGate, []any{owner, ms(w.now), string(list)}
	}
	var paused string
	if err := w.queryRow(query, args...).Scan(&paused, &reserved); err != nil {
		return nil, 0, fmt.Errorf("store: claim next: read paused queues: %w", err)
	}
	if paused == "" {
		return queues, reserved, nil
	}
	closed := strings.Split(paused, "\n")
	open = slices.DeleteFunc(slices.Clone(queues), func(q string) bool { return slices.Contains(closed, q) })
	return open, reserved, nil
}

// paused reports whether queue q is paused.
func (w *wtx) paused(q string) (bool, error) {
	var n int
	err := w.queryRow(`SELECT count(*) FROM paused_queues WHERE queue = ?`, q).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: read whether %s is paused: %w", q, err)
	}
	return n > 0, nil
}

// markPaused sets Waiting on the pending todos of paused queues among todos.
func (s *Store) markPaused(ctx context.Context, todos []Todo) ([]Todo, error) {
	if !slices.ContainsFunc(todos, func(t Todo) bool { return t.State == StatePending }) {
		return todos, nil
	}
	paused, err := s.PausedQueues(ctx)
	if err != nil || len(paused) == 0 {
		return todos, err
	}
	for i, t := range todos {
		if t.State == StatePending && slices.ContainsFunc(paused, func(p PausedQueue) bool { return p.Queue == t.Queue }) {
			todos[i].Waiting = WaitingPaused
		}
	}
	return todos, nil
}
