package store

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboardhq/switchboard/internal/textcut"
)

// The human gate. A worker about to take an irreversible step asks a human
// first (RequestApproval): its todo stays claimed by it, with no lease expiry
// (nothing reaps it, no one else can claim it), until a human decides (Decide).
// The todo is then pending again, with the answer on it, reserved for the worker
// that asked for ApprovalHold: claim_next gives it to that worker before anything
// else, and to anyone once the hold is over.

// Approval states.
const (
	ApprovalAsked    = "asked"
	ApprovalApproved = "approved"
	ApprovalDenied   = "denied"
	// WaitingApproval is Todo.Waiting for a todo awaiting a human's decision.
	WaitingApproval = "approval"
	// WaitingPaused is Todo.Waiting for a pending todo on a paused queue.
	WaitingPaused = "paused"
)

// ApprovalHold is how long, after a decision, the todo is claimable only by the
// worker that asked.
const ApprovalHold = time.Minute

// MaxApprovalText bounds a question and a decision's comment.
const MaxApprovalText = 4 << 10

// RequestApproval stops the lease a holds on its todo and asks a human question.
func (s *Store) RequestApproval(ctx context.Context, a Ack, question string) (Todo, error) {
	if question == "" || len(question) > MaxApprovalText {
		return Todo{}, fmt.Errorf("store: request approval on todo %d: the question must be 1 to %d bytes: %w",
			a.ID, MaxApprovalText, ErrInvalid)
	}
	var t Todo
	err := s.write(ctx, func(w *wtx) error {
		if _, err := w.held(a, "request approval on"); err != nil {
			return err
		}
		var err error
		t, err = scanTodo(w.queryRow(`UPDATE todos SET lease_expires_at = NULL, approval = 'asked',
				approval_question = ?, approval_comment = '', approval_by = '', updated_at = ?
			WHERE id = ? RETURNING `+todoColumns, question, ms(w.now), a.ID), false)
		if err != nil {
			return fmt.Errorf("store: request approval on todo %d: %w", a.ID, err)
		}
		w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StateClaimed, Source: t.Source.Type, Cause: "approval_asked"})
		return w.audit(a.Owner, "todo.request_approval", todoTarget(a.ID), "", textcut.Bytes(question, 200))
	})
	return t, err
}

// Decide answers the question on a todo awaiting approval: approve or deny, with
// a comment, by actor (a human). The todo goes back to pending, reserved for the
// worker that asked (see ApprovalHold). A second decision, or one on a todo that
// no longer waits (cancelled, released), is a conflict and changes nothing.
func (s *Store) Decide(ctx context.Context, id int64, approve bool, comment, actor string) (Todo, error) {
	if len(comment) > MaxApprovalText {
		return Todo{}, fmt.Errorf("store: decide on todo %d: the comment is over %d bytes: %w", id, MaxApprovalText, ErrInvalid)
	}
	var t Todo
	err := s.write(ctx, func(w *wtx) error {
		c, err := w.notCancelled(id, "decide on")
		if err != nil {
			return err
		}
		if c.state != StateClaimed || c.leaseExpiry != 0 {
			return fmt.Errorf("store: decide on todo %d: it is not awaiting approval (it is %s; was it decided already?): %w",
				id, c.state, ErrConflict)
		}
		answer, action := ApprovalDenied, "todo.deny"
		if approve {
			answer, action = ApprovalApproved, "todo.approve"
		}
		hold := w.now.Add(ApprovalHold)
		t, err = scanTodo(w.queryRow(`UPDATE todos SET state = 'pending', owner = NULL, reserved_for = ?,
				attempts = ?, approval = ?, approval_comment = ?, approval_by = ?, available_at = ?, updated_at = ?
			WHERE id = ? RETURNING `+todoColumns,
			c.owner, max(c.attempts-1, 0), answer, comment, actor, ms(hold), ms(w.now), id), false)
		if err != nil {
			return fmt.Errorf("store: decide on todo %d: %w", id, err)
		}
		// Claimable at once by the worker that asked: the doorbell rings now, and
		// again for everyone when the hold is over.
		// The audit row's id goes with the change, as a return's does: other
		// processes' watches find the decision by its row (see returnCauses).
		auditID, err := w.auditRow(actor, action, todoTarget(id), "", textcut.Bytes(comment, 200))
		w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StatePending, Source: t.Source.Type,
			Claimable: true, ClaimableAt: hold, Cause: "approval_decided", auditID: auditID})
		return err
	})
	return t, err
}

// claimReserved claims todo id, reserved for owner, if it is on one of queues
// (not paused): ok is false when it is not, or is no longer pending.
func (w *wtx) claimReserved(id int64, owner string, queues []string, ttl time.Duration) (Todo, bool, error) {
	query := `SELECT queue FROM todos WHERE id = ? AND state = 'pending' AND reserved_for = ?`
	if w.w.s.pg {
		query += ` FOR UPDATE`
	}
	var q string
	err := w.queryRow(query, id, owner).Scan(&q)
	if notFound(err) || (err == nil && !contains(queues, q)) {
		return Todo{}, false, nil
	}
	if err != nil {
		return Todo{}, false, fmt.Errorf("store: claim todo %d reserved for %s: %w", id, owner, err)
	}
	t, err := w.claim(id, owner, ttl, "todo.claim_next") // which ends the reservation
	return t, err == nil, err
}

// claimable checks, for a claim by id, that the todo's queue is not paused and
// that it is claimable by a.Owner now: its backoff over, or reserved for it.
func (w *wtx) claimable(a Ack, c curTodo) error {
	paused, err := w.paused(c.queue)
	if err != nil {
		return err
	}
	switch {
	case paused:
		return fmt.Errorf("store: claim todo %d: queue %s is paused: %w", a.ID, c.queue, ErrConflict)
	case c.keyWaiting:
		// One todo of a key is worked on at a time (docs/flow-control.md): this
		// one is claimable once the one before it ends. That one may be
		// pending (never claimed, released, its lease run out): it is named.
		var front int64
		var state string
		err := w.queryRow(`SELECT f.id, f.state FROM todos t JOIN todos f ON f.queue = t.queue AND f.key = t.key
				AND f.key_waiting = 0 AND f.state IN ('pending', 'claimed') WHERE t.id = ?`, a.ID).Scan(&front, &state)
		if notFound(err) {
			return fmt.Errorf("store: claim todo %d: it waits behind an earlier todo of its key: %w", a.ID, ErrConflict)
		}
		if err != nil {
			return fmt.Errorf("store: claim todo %d: read the todo its key waits for: %w", a.ID, err)
		}
		return fmt.Errorf("store: claim todo %d: it waits behind todo %d of its key (%s); it is claimable once that one ends: %w",
			a.ID, front, state, ErrConflict)
	case c.availableAt <= ms(w.now):
		return nil
	case c.reservedFor == a.Owner:
		return nil // the claim ends the reservation
	case c.reservedFor != "":
		return fmt.Errorf("store: claim todo %d: it is held for the worker that asked for approval until %s: %w", a.ID,
			fromMS(c.availableAt).Format(time.RFC3339), ErrConflict)
	}
	// Never tried: a delay or a debounce holds it, as the board says ("delayed").
	why := "delayed"
	if c.attempts > 0 {
		why = "backing off"
	}
	return fmt.Errorf("store: claim todo %d: it is %s until %s: %w", a.ID, why,
		fromMS(c.availableAt).Format(time.RFC3339), ErrConflict)
}

// QueueWaits counts, per queue, the todos awaiting approval.
func (s *Store) QueueWaits(ctx context.Context) (map[string]int64, error) {
	rows, err := s.query(ctx, `SELECT queue, count(*) FROM todos INDEXED BY todos_awaiting
		WHERE state = 'claimed' AND lease_expires_at IS NULL GROUP BY queue`)
	if err != nil {
		return nil, fmt.Errorf("store: count todos awaiting approval: %w", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var q string
		var n int64
		if err := rows.Scan(&q, &n); err != nil {
			return nil, fmt.Errorf("store: count todos awaiting approval: %w", err)
		}
		out[q] = n
	}
	return out, rows.Err()
}

// AwaitingApproval lists the todos awaiting approval, oldest first, at most limit.
func (s *Store) AwaitingApproval(ctx context.Context, limit int) ([]Todo, error) {
	rows, err := s.query(ctx, `SELECT `+todoColumns+` FROM todos INDEXED BY todos_awaiting
		WHERE state = 'claimed' AND lease_expires_at IS NULL ORDER BY id LIMIT ?`, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list todos awaiting approval: %w", err)
	}
	out, err := compactTodos(rows)
	if err != nil {
		return nil, fmt.Errorf("store: list todos awaiting approval: %w", err)
	}
	return out, nil
}
