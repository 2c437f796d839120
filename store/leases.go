package store

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboardhq/switchboard/internal/textcut"
)

// Lease transitions. A claimed todo belongs to its owner until its lease expires;
// from that instant heartbeat, complete, fail and release answer ErrConflict, even
// before the reaper has requeued it. LeaseSeq is the fencing token, and every
// acknowledgement must carry the current lease's: the owner alone names an agent,
// not which of its workers holds the todo now, so a worker that lost its lease
// cannot act on a todo another worker of the same agent has claimed since.

// Ack identifies the lease an agent acts under.
type Ack struct {
	ID    int64
	Owner string // agent:<id>
	// LeaseSeq is the lease acted under, as the claim returned it. 0 is refused
	// (ErrNoLeaseSeq) by every transition on a claimed todo; Claim ignores it.
	LeaseSeq int64
	Queues   []string // the caller's queue scope, checked again in the transaction
}

// Claim claims one pending todo by id.
func (s *Store) Claim(ctx context.Context, a Ack, ttl time.Duration) (Todo, error) {
	var t Todo
	err := s.write(ctx, func(w *wtx) error {
		cur, err := w.current(a)
		if err != nil {
			return err
		}
		if cur.state != StatePending {
			return fmt.Errorf("store: claim todo %d: it is %s: %w", a.ID, cur.state, ErrConflict)
		}
		if err := w.claimable(a, cur); err != nil {
			return err
		}
		t, err = w.claim(a.ID, a.Owner, ttl, "todo.claim")
		return err
	})
	return t, err
}

func (w *wtx) claim(id int64, owner string, ttl time.Duration, action string) (Todo, error) {
	now := w.now
	// A reservation (see Decide) ends with any claim: the todo is no one's to
	// wait for once someone holds it, nor after its lease ends.
	t, err := w.w.s.scanFull(w.queryRow(`UPDATE todos SET state = 'claimed', owner = ?, attempts = attempts + 1,
			lease_seq = lease_seq + 1, lease_expires_at = ?, updated_at = ?, reserved_for = NULL
		WHERE id = ? AND state = 'pending' RETURNING `+w.w.s.fullColumns(),
		owner, ms(now.Add(ttl)), ms(now), id))
	if notFound(err) {
		return Todo{}, fmt.Errorf("store: claim todo %d: %w", id, ErrConflict)
	}
	if err != nil {
		return Todo{}, fmt.Errorf("store: claim todo %d: %w", id, err)
	}
	if err := w.audit(owner, action, todoTarget(id), "", fmt.Sprintf("attempt=%d lease_seq=%d", t.Attempts, t.LeaseSeq)); err != nil {
		return Todo{}, err
	}
	w.changed(TodoChange{ID: id, Queue: t.Queue, State: StateClaimed, Source: t.Source.Type, Cause: "claim"})
	return t, nil
}

type curTodo struct {
	queue, state, owner string
	cancelledBy         string
	reservedFor         string
	keyWaiting          bool // pending behind an earlier todo of its key (its front)
	leaseSeq            int64
	leaseExpiry         int64
	availableAt         int64
	attempts, maxAtt    int
}

// currentTodo reads what a transition decides on. On SQLite the writer's
// transaction holds the database's one write lock already; on PostgreSQL, where
// other processes' transactions run beside it, pgCurrentTodo locks the row
// first, so that nothing changes it between the check and the transition (and a
// transition that waited for the lock checks the row as the other left it).
const (
	currentTodo = `SELECT queue, state, coalesce(owner, ''), lease_seq, coalesce(lease_expires_at, 0),
			available_at, attempts, max_attempts, cancelled_by, coalesce(reserved_for, ''), key_waiting FROM todos WHERE id = ?`
	pgCurrentTodo = currentTodo + ` FOR UPDATE`
)

// current reads the fields a transition decides on, under the row's lock on
// PostgreSQL, and checks the caller's queue scope before anything else is looked at.
func (w *wtx) current(a Ack) (curTodo, error) {
	var c curTodo
	query := currentTodo
	if w.w.s.pg {
		query = pgCurrentTodo
	}
	err := w.queryRow(query, a.ID).
		Scan(&c.queue, &c.state, &c.owner, &c.leaseSeq, &c.leaseExpiry, &c.availableAt, &c.attempts, &c.maxAtt,
			&c.cancelledBy, &c.reservedFor, &c.keyWaiting)
	if notFound(err) {
		return c, fmt.Errorf("store: todo %d: %w", a.ID, ErrNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("store: load todo %d: %w", a.ID, err)
	}
	return c, inScope(a, c.queue)
}

// inScope checks the todo's queue against the caller's scope. Out of scope looks
// the same as absent: nothing about it is revealed.
func inScope(a Ack, queue string) error {
	if a.Queues != nil && !contains(a.Queues, queue) {
		return fmt.Errorf("store: todo %d: %w", a.ID, ErrNotFound)
	}
	return nil
}

// held checks that a holds the live lease on the todo.
func (w *wtx) held(a Ack, verb string) (curTodo, error) {
	c, err := w.current(a)
	if err != nil {
		return c, err
	}
	return c, w.leaseErr(a, c, verb)
}

// leaseErr says why a does not hold the live lease on c, or nil if it does.
func (w *wtx) leaseErr(a Ack, c curTodo, verb string) error {
	switch {
	case c.cancelledBy != "":
		return fmt.Errorf("store: %s todo %d: it was cancelled by %s: %w", verb, a.ID, c.cancelledBy, ErrConflict)
	case c.state != StateClaimed:
		return fmt.Errorf("store: %s todo %d: it is %s, not claimed: %w", verb, a.ID, c.state, ErrConflict)
	case c.owner != a.Owner:
		return fmt.Errorf("store: %s todo %d: it is claimed by someone else: %w", verb, a.ID, ErrConflict)
	case a.LeaseSeq == 0:
		return fmt.Errorf("store: %s todo %d: %w", verb, a.ID, ErrNoLeaseSeq)
	case a.LeaseSeq != c.leaseSeq:
		return fmt.Errorf("store: %s todo %d: lease %d was lost (current lease is %d): %w", verb, a.ID, a.LeaseSeq, c.leaseSeq, ErrConflict)
	case c.leaseExpiry == 0:
		return fmt.Errorf("store: %s todo %d: it is awaiting a human's approval; the answer comes with your next claim: %w",
			verb, a.ID, ErrConflict)
	case c.leaseExpiry <= ms(w.now):
		return fmt.Errorf("store: %s todo %d: the lease expired at %s: %w", verb, a.ID,
			fromMS(c.leaseExpiry).Format(time.RFC3339), ErrConflict)
	}
	return nil
}

// Heartbeat extends a live lease to now+ttl. It never shortens a lease: a longer
// expiry already granted is kept.
func (s *Store) Heartbeat(ctx context.Context, a Ack, ttl time.Duration) (Todo, error) {
	if s.pg {
		return s.pgHeartbeat(ctx, a, ttl)
	}
	var t Todo
	err := s.write(ctx, func(w *wtx) error {
		if _, err := w.held(a, "heartbeat"); err != nil {
			return err
		}
		var err error
		query := `UPDATE todos SET lease_expires_at = max(lease_expires_at, ?), updated_at = ?
			WHERE id = ? RETURNING ` + todoColumns
		t, err = scanTodo(w.queryRow(query, ms(w.now.Add(ttl)), ms(w.now), a.ID), false)
		if err != nil {
			return fmt.Errorf("store: heartbeat todo %d: %w", a.ID, err)
		}
		return w.audit(a.Owner, "todo.heartbeat", todoTarget(a.ID), "", "")
	})
	return t, err
}

// Complete marks a claimed todo done with an optional result.
func (s *Store) Complete(ctx context.Context, a Ack, result string) (Todo, error) {
	var t Todo
	if err := s.submit(ctx, s.completeReq(ctx, a, result, &t)); err != nil {
		return Todo{}, err // whatever a run rolled back left in t
	}
	return t, nil
}

// completeReq is Complete's write; it leaves the completed todo in t.
func (s *Store) completeReq(ctx context.Context, a Ack, result string, t *Todo) *writeReq {
	if s.pg {
		return s.pgCompleteReq(ctx, a, result, t)
	}
	return againReq(ctx, func(w *wtx) error {
		if _, err := w.held(a, "complete"); err != nil {
			return err
		}
		var err error
		*t, err = scanTodo(w.queryRow(`UPDATE todos SET state = 'done', result = ?, lease_expires_at = NULL,
				updated_at = ?, finished_at = ?
			WHERE id = ? RETURNING `+todoColumns, result, ms(w.now), ms(w.now), a.ID), false)
		if err != nil {
			return fmt.Errorf("store: complete todo %d: %w", a.ID, err)
		}
		w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StateDone, Source: t.Source.Type, Cause: "complete"})
		// The todo's own audit row first, then its key's next todo's, as on
		// PostgreSQL (pgKeyNext).
		if err := w.audit(a.Owner, "todo.complete", todoTarget(a.ID), "", ""); err != nil {
			return err
		}
		return w.keyEnded(*t)
	})
}

// RetryBackoff is how long a failed todo waits before it is claimable again:
// 5 s doubled per attempt, at most 10 minutes.
func RetryBackoff(attempts int) time.Duration {
	d := 5 * time.Second
	for i := 1; i < attempts && d < 10*time.Minute; i++ {
		d *= 2
	}
	return min(d, 10*time.Minute)
}

// Fail records an error on a claimed todo. With retry and attempts left it goes back
// to pending after RetryBackoff; otherwise it is dead-lettered (state failed).
func (s *Store) Fail(ctx context.Context, a Ack, errText string, retry bool) (Todo, error) {
	var t Todo
	if err := s.submit(ctx, s.failReq(ctx, a, errText, retry, &t)); err != nil {
		return Todo{}, err // whatever a run rolled back left in t
	}
	return t, nil
}

// failReq is Fail's write; it leaves the failed todo in t.
func (s *Store) failReq(ctx context.Context, a Ack, errText string, retry bool, t *Todo) *writeReq {
	if s.pg {
		return s.pgFailReq(ctx, a, errText, retry, t)
	}
	return againReq(ctx, func(w *wtx) error {
		c, err := w.held(a, "fail")
		if err != nil {
			return err
		}
		if retry && c.attempts < c.maxAtt {
			// reserved_for goes: a backoff is no one's hold (see Decide).
			*t, err = scanTodo(w.queryRow(`UPDATE todos SET state = 'pending', owner = NULL, lease_expires_at = NULL,
					reserved_for = NULL, last_error = ?, available_at = ?, updated_at = ?
				WHERE id = ? RETURNING `+todoColumns,
				errText, ms(w.now.Add(RetryBackoff(c.attempts))), ms(w.now), a.ID), false)
			if err != nil {
				return fmt.Errorf("store: fail todo %d: %w", a.ID, err)
			}
			// Pending, but not claimable before available_at: the doorbell rings then.
			// The audit row's id goes with the change, as a return's does (requeued):
			// other processes time the backoff from the row, this one from the change.
			auditID, err := w.auditRow(a.Owner, "todo.fail", todoTarget(a.ID), "retry", textcut.Bytes(errText, 200))
			w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StatePending, Source: t.Source.Type,
				ClaimableAt: t.AvailableAt, Cause: "retry_backoff", auditID: auditID})
			return err
		}
		*t, err = scanTodo(w.queryRow(`UPDATE todos SET state = 'failed', owner = NULL, lease_expires_at = NULL,
				last_error = ?, updated_at = ?, finished_at = ?
			WHERE id = ? RETURNING `+todoColumns, errText, ms(w.now), ms(w.now), a.ID), false)
		if err != nil {
			return fmt.Errorf("store: fail todo %d: %w", a.ID, err)
		}
		w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StateFailed, Source: t.Source.Type, Cause: "dead_letter"})
		// Audited as a dead letter, as the reaper's are, so that one action finds
		// them all; the detail is the agent's error. Then the key's next todo.
		if err := w.audit(a.Owner, "todo.dead_letter", todoTarget(a.ID), "", textcut.Bytes(errText, 200)); err != nil {
			return err
		}
		return w.keyEnded(*t)
	})
}

// Release hands a claimed todo back at once. The claim does not count as an attempt.
func (s *Store) Release(ctx context.Context, a Ack) (Todo, error) {
	if s.pg {
		return s.pgRelease(ctx, a)
	}
	var t Todo
	err := s.write(ctx, func(w *wtx) error {
		if _, err := w.held(a, "release"); err != nil {
			return err
		}
		var err error
		t, err = w.release(a.ID, a.Owner, "todo.release", "")
		return err
	})
	return t, err
}

// ReleaseByHuman hands a claimed todo back on an operator's word, whoever holds it.
func (s *Store) ReleaseByHuman(ctx context.Context, id int64, actor string) (Todo, error) {
	var t Todo
	err := s.write(ctx, func(w *wtx) error {
		c, err := w.current(Ack{ID: id})
		if err != nil {
			return err
		}
		if c.state != StateClaimed {
			return fmt.Errorf("store: release todo %d: it is %s, not claimed: %w", id, c.state, ErrConflict)
		}
		t, err = w.release(id, actor, "todo.release", "")
		return err
	})
	return t, err
}

// releaseUnasked is release's setting of a todo's approval: a question no
// one answered goes with the worker that asked it (the audit log keeps it),
// so that the next worker's claim and the board show none; an answer stays.
const releaseUnasked = `approval = CASE WHEN approval = 'asked' THEN '' ELSE approval END,
			approval_question = CASE WHEN approval = 'asked' THEN '' ELSE approval_question END`

func (w *wtx) release(id int64, actor, action, detail string) (Todo, error) {
	query := `UPDATE todos SET state = 'pending', owner = NULL, lease_expires_at = NULL,
			attempts = max(attempts - 1, 0), available_at = ?, updated_at = ?, ` + releaseUnasked + `
		WHERE id = ? RETURNING ` + todoColumns
	if w.w.s.pg {
		// Still claimed, as the row is when it is released, checked again for a
		// caller that did not lock it first (a revoked endpoint's todos).
		query = `UPDATE todos SET state = 'pending', owner = NULL, lease_expires_at = NULL,
			attempts = greatest(attempts - 1, 0), available_at = ?, updated_at = ?, ` + releaseUnasked + `
		WHERE id = ? AND state = 'claimed' RETURNING ` + todoColumns
	}
	t, err := scanTodo(w.queryRow(query, ms(w.now), ms(w.now), id), false)
	if notFound(err) {
		return Todo{}, fmt.Errorf("store: release todo %d: it is no longer claimed: %w", id, ErrConflict)
	}
	if err != nil {
		return Todo{}, fmt.Errorf("store: release todo %d: %w", id, err)
	}
	return t, w.requeued(TodoChange{ID: t.ID, Queue: t.Queue, State: StatePending, Source: t.Source.Type,
		Claimable: true, Cause: "release"}, actor, action, detail)
}

// Retry puts a dead-lettered todo back on its queue with its attempts reset.
func (s *Store) Retry(ctx context.Context, id int64, actor string) (Todo, error) {
	var t Todo
	err := s.write(ctx, func(w *wtx) error {
		c, err := w.current(Ack{ID: id})
		if err != nil {
			return err
		}
		if c.state != StateFailed {
			return fmt.Errorf("store: retry todo %d: it is %s, not failed: %w", id, c.state, ErrConflict)
		}
		t, err = w.retry(id, actor, "")
		return err
	})
	return t, err
}

// retry puts the failed todo id back on its queue, claimable at once, with its
// attempts reset.
func (w *wtx) retry(id int64, actor, detail string) (Todo, error) {
	// A keyed todo whose key has a front again waits behind it.
	waiting, err := w.keyWaitingOnReturn(id)
	if err != nil {
		return Todo{}, err
	}
	// A question left unanswered (the todo was cancelled awaiting approval)
	// goes, as on a release: no worker waits for its answer.
	t, err := scanTodo(w.queryRow(`UPDATE todos SET state = 'pending', attempts = 0, available_at = ?,
			updated_at = ?, finished_at = NULL, cancelled_by = '', key_waiting = ?, `+releaseUnasked+`
		WHERE id = ? RETURNING `+todoColumns, ms(w.now), ms(w.now), boolInt(waiting), id), false)
	if err != nil {
		return Todo{}, fmt.Errorf("store: retry todo %d: %w", id, err)
	}
	return t, w.requeued(TodoChange{ID: t.ID, Queue: t.Queue, State: StatePending, Source: t.Source.Type,
		Claimable: !waiting, Cause: "retry"}, actor, "todo.retry", detail)
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// ClaimsByOwner counts the claimed todos of each owner (agent:<id>): what each
// agent holds now.
func (s *Store) ClaimsByOwner(ctx context.Context) (map[string]int, error) {
	rows, err := s.query(ctx, `SELECT owner, count(*) FROM todos INDEXED BY todos_leases
		WHERE state = 'claimed' GROUP BY owner`)
	if err != nil {
		return nil, fmt.Errorf("store: count claims: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var owner string
		var n int
		if err := rows.Scan(&owner, &n); err != nil {
			return nil, fmt.Errorf("store: count claims: %w", err)
		}
		out[owner] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: count claims: %w", err)
	}
	return out, nil
}
