package store

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/switchboardhq/switchboard/internal/textcut"
)

// Lease transitions on PostgreSQL as one statement each, so that the writer can
// pipeline them (pipeline.go). The UPDATE checks the lease in its WHERE clause:
// it locks the row, and a row another transaction changed meanwhile is checked
// again as that transaction left it, so the check and the transition are one
// step as with pgCurrentTodo's lock. The audit row is written by a CTE from the
// updated row, and queue_counts follows by its trigger. When nothing was updated,
// the statement returns the row as it was, and leaseErr says why as held does.

// pgLeaseHeld is the lease check of held, for a WHERE clause. Its arguments are
// pgLeaseArgs. The todo is found by id alone: state and lease_expires_at are
// written so that no index serves them, as in pgCompleteSet. Otherwise, with
// statistics taken when few todos were claimed, PostgreSQL read every lease
// (todos_leases) for each acknowledgement
// (TestAnAckFindsItsTodoByIdWhateverTheStatistics).
const pgLeaseHeld = `id = ? AND state || '' = 'claimed' AND owner = ? AND lease_seq = ? AND lease_expires_at + 0 > ?
	AND (? OR queue = ANY(?))`

// pgLeaseOutcome ends a transition whose UPDATE is the CTE changed and whose
// audit row the CTE logged inserts: the updated row, 1 and the audit row's id, or
// else the row as it is and 0, or no row if there is no such todo. Its argument
// is the todo's id.
const pgLeaseOutcome = `SELECT *, 1, (SELECT id FROM logged) FROM changed
	UNION ALL SELECT ` + todoColumns + `, 0, 0 FROM todos WHERE id = ? AND NOT EXISTS (SELECT 1 FROM changed)`

func pgLeaseArgs(a Ack, now int64) []any {
	queues := a.Queues
	if queues == nil {
		queues = []string{}
	}
	return []any{a.ID, a.Owner, a.LeaseSeq, now, a.Queues == nil, queues}
}

// leaseOutcome reads a row of pgLeaseOutcome: the updated todo, or why a did
// not hold the lease.
func (w *wtx) leaseOutcome(a Ack, verb string, row scanner) (Todo, error) {
	t, _, err := w.leaseOutcomeAudited(a, verb, row)
	return t, err
}

// leaseOutcomeAudited is leaseOutcome that also returns the audit row's id.
func (w *wtx) leaseOutcomeAudited(a Ack, verb string, row scanner, more ...any) (Todo, int64, error) {
	var updated int
	var auditID int64
	t, err := scanTodoAnd(row, append([]any{&updated, &auditID}, more...)...)
	if notFound(err) {
		return Todo{}, 0, fmt.Errorf("store: todo %d: %w", a.ID, ErrNotFound)
	}
	if err != nil {
		return Todo{}, 0, fmt.Errorf("store: %s todo %d: %w", verb, a.ID, err)
	}
	if updated == 1 {
		return t, auditID, nil
	}
	if err := inScope(a, t.Queue); err != nil {
		return Todo{}, 0, err
	}
	c := curTodo{queue: t.Queue, state: t.State, owner: t.Owner, leaseSeq: t.LeaseSeq, cancelledBy: t.CancelledBy}
	if t.LeaseExpiry != nil {
		c.leaseExpiry = ms(*t.LeaseExpiry)
	}
	if err := w.leaseErr(a, c, verb); err != nil {
		return Todo{}, 0, err
	}
	// The row read was as it stood when the statement began; the UPDATE saw it
	// after another transaction changed it.
	return Todo{}, 0, fmt.Errorf("store: %s todo %d: the lease changed meanwhile: %w", verb, a.ID, ErrConflict)
}

// pgKeyNext is keyEnded inside a transition's statement (complete, fail; one
// todo or several, pgCompleteSet): todos_free_keys (migration 0024) for the todos
// the CTE changed that left the queue for good, at the time its one argument
// gives, once the statement's own audit rows (its CTE logged) are written. As in
// keyEnded, the writer lock every write transaction holds (pgWriterLock) keeps
// an add of the same key from passing it. Its CTE nx has a row for each front
// that freed its key's next todo: front, x_id, x_queue, x_key, x_source,
// x_available and f_id (the todo.key_free audit row).
const pgKeyNext = `nx AS (SELECT * FROM todos_free_keys(ARRAY(SELECT id FROM changed WHERE state <> 'pending'), ?,
		(SELECT count(*) FROM logged)))
	`

// pgKeyedOutcome is pgLeaseOutcome with, after the audit row's id, the new key
// front's id, source type, available_at and audit row (pgKeyNext), NULL when
// there is none.
const pgKeyedOutcome = `SELECT *, 1, (SELECT id FROM logged), (SELECT x_id FROM nx), (SELECT x_source FROM nx),
		(SELECT x_available FROM nx), (SELECT f_id FROM nx) FROM changed
	UNION ALL SELECT ` + todoColumns + `, 0, 0, NULL, NULL, NULL, NULL FROM todos WHERE id = ? AND NOT EXISTS (SELECT 1 FROM changed)`

// keyedOutcome is leaseOutcome for a statement ending in pgKeyedOutcome: a key
// front moved by pgKeyNext is announced as keyEnded announces it.
func (w *wtx) keyedOutcome(a Ack, verb string, row scanner) (Todo, error) {
	var next sql.NullInt64
	var src sql.NullString
	var avail, freed sql.NullInt64
	t, _, err := w.leaseOutcomeAudited(a, verb, row, &next, &src, &avail, &freed)
	if err == nil && next.Valid {
		w.keyFreed(next.Int64, t.Queue, src.String, fromMS(avail.Int64), freed.Int64)
	}
	return t, err
}

// pgComplete is Complete's statement.
const pgComplete = `WITH changed AS (UPDATE todos SET state = 'done', result = ?, lease_expires_at = NULL,
		updated_at = ?, finished_at = ?
		WHERE ` + pgLeaseHeld + ` RETURNING ` + todoColumns + `),
	logged AS (INSERT INTO audit (at, actor, action, target, outcome, detail)
		SELECT ?, ?, 'todo.complete', 'todo:' || id, 'ok', '' FROM changed RETURNING id, at),
	` + pgKeyNext + pgKeyedOutcome

// pgCompleteArgs are pgComplete's arguments: a's complete with result at now
// (unix ms).
func pgCompleteArgs(a Ack, result string, now int64) []any {
	return append(append([]any{result, now, now}, pgLeaseArgs(a, now)...), now, a.Owner, now, a.ID)
}

func (s *Store) pgCompleteReq(ctx context.Context, a Ack, result string, t *Todo) *writeReq {
	args := func(now time.Time) []any { return pgCompleteArgs(a, result, ms(now)) }
	set := &pgSetWrite{kind: pgCompleteSetKind, elem: []any{a.ID, a.Owner, a.LeaseSeq, result, a.Queues}}
	return s.oneReq(ctx, &pgOne{query: pgComplete, args: args, set: set, ack: a.ID, read: func(w *wtx, row scanner) error {
		done, err := w.keyedOutcome(a, "complete", row)
		if err != nil {
			return err
		}
		*t = done
		w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StateDone, Source: t.Source.Type, Cause: "complete"})
		return nil
	}})
}

// pgClaimGated is pgClaimHead with the claim gate (see gate and claimReserved)
// inside it, for a claim on one queue in one statement: what todos_lock_claims
// (migration 0023) assigns to one claim by owner (nothing when the queue is
// paused; the oldest todo of the queue still reserved for owner after a human's
// decision, if there is one; else the queue's head), when the write it follows,
// if any, succeeded. The reservation is cleared as the todo is claimed.
const pgClaimGated = `WITH open AS (SELECT ?::bigint = 0 OR EXISTS (SELECT 1 FROM todos g WHERE g.id = ? AND ` + pgClaimAfter + `) AS ok),
	assigned AS (SELECT id FROM todos_lock_claims(?, ?, CASE WHEN (SELECT ok FROM open) THEN ARRAY[1::bigint] ELSE '{}' END, ARRAY[?::text])),
	claimed AS (UPDATE todos SET state = 'claimed', owner = ?, attempts = attempts + 1,
			lease_seq = lease_seq + 1, lease_expires_at = ?, updated_at = ?, reserved_for = NULL
		WHERE id = (SELECT id FROM assigned) AND state = 'pending'
		RETURNING ` + pgTodoColumnsFull + `),
	logged AS (INSERT INTO audit (at, actor, action, target, outcome, detail)
		SELECT ?, ?, 'todo.claim_next', 'todo:' || id, 'ok',
			'attempt=' || attempts || ' lease_seq=' || lease_seq FROM claimed)
	SELECT * FROM claimed`

// pgClaimAfter is true of the todo g that a claim follows (submitThen) when the
// complete or fail it follows changed g in this very transaction: g's row is
// this transaction's (xmin), with the lease the ack named, and done or failed
// now, or pending with this transaction's todo.fail audit row (a fail that
// retries). A pending row of this transaction is not enough: a complete or fail
// of its key's front in the batch frees a todo waiting behind it (pgKeyNext),
// which may be the one a refused ack named. No other write of the batch acks g
// (ackedTwice). A follow-up claim runs after every other write of a pipelined
// batch (pgUnits), and claims nothing when the write it follows changed
// nothing. Only a pipelined batch needs it, and only there does it hold: under
// a savepoint a row's xmin is the savepoint's own xid, and the writer checks
// the write followed before it runs the claim (runEach).
const (
	pgClaimAfter  = `g.lease_seq = ? AND ` + pgChangedHere
	pgChangedHere = `g.xmin = pg_current_xact_id()::xid AND (g.state IN ('done', 'failed')
		OR g.state = 'pending' AND EXISTS (SELECT 1 FROM audit a WHERE a.target = 'todo:' || g.id
			AND a.action = 'todo.fail' AND a.xmin = pg_current_xact_id()::xid))`
)

// pgClaimOneReq is ClaimNext on PostgreSQL for one queue: pgClaimGated alone,
// after the write that acked after, if set.
func (s *Store) pgClaimOneReq(ctx context.Context, owner, queue string, ttl time.Duration, after *Ack, out *claimed) *writeReq {
	var afterID, afterSeq int64
	key := queue
	if after != nil {
		afterID, afterSeq, key = after.ID, after.LeaseSeq, queue+"\x00after"
	}
	argsAfter := func(id, seq int64) func(now time.Time) []any {
		return func(now time.Time) []any { return pgClaimGatedArgs(queue, owner, ttl, id, seq, ms(now)) }
	}
	set := &pgSetWrite{kind: pgClaimSetKind, key: key, elem: []any{queue, owner, ttl.Milliseconds(), afterID, afterSeq}}
	return s.oneReq(ctx, &pgOne{query: pgClaimGated, args: argsAfter(afterID, afterSeq), fnArgs: argsAfter(0, 0), set: set,
		read: func(w *wtx, row scanner) error {
			*out = claimed{} // a batch that ran again runs read again
			t, err := w.w.s.scanFull(row)
			if notFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("store: claim next in %s: %w", queue, err)
			}
			*out = claimed{t, true}
			w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StateClaimed, Source: t.Source.Type, Cause: "claim"})
			return nil
		}})
}

// pgClaimGatedArgs are pgClaimGated's arguments: a claim by owner on queue at
// now (unix ms), after the write that acked afterID at lease afterSeq (0: none).
func pgClaimGatedArgs(queue, owner string, ttl time.Duration, afterID, afterSeq, now int64) []any {
	return []any{afterID, afterID, afterSeq, queue, now, owner, owner, now + ttl.Milliseconds(), now, now, owner}
}

// pgHeartbeat is Heartbeat's statement.
const pgHeartbeat = `WITH changed AS (UPDATE todos SET lease_expires_at = greatest(lease_expires_at, ?), updated_at = ?
		WHERE ` + pgLeaseHeld + ` RETURNING ` + todoColumns + `),
	logged AS (INSERT INTO audit (at, actor, action, target, outcome, detail)
		SELECT ?, ?, 'todo.heartbeat', 'todo:' || id, 'ok', '' FROM changed RETURNING id)
	` + pgLeaseOutcome

// pgHeartbeatArgs are pgHeartbeat's arguments: a's lease extended to ttl from now.
func pgHeartbeatArgs(a Ack, ttl time.Duration, now time.Time) []any {
	at := ms(now)
	return append(append([]any{ms(now.Add(ttl)), at}, pgLeaseArgs(a, at)...), at, a.Owner, a.ID)
}

func (s *Store) pgHeartbeat(ctx context.Context, a Ack, ttl time.Duration) (t Todo, err error) {
	args := func(now time.Time) []any { return pgHeartbeatArgs(a, ttl, now) }
	err = s.writeOne(ctx, &pgOne{query: pgHeartbeat, args: args, quiet: true, read: func(w *wtx, row scanner) error {
		extended, err := w.leaseOutcome(a, "heartbeat", row)
		t = extended
		return err
	}})
	return t, err
}

// pgFail is Fail's statement: back to pending after RetryBackoff when retry is
// asked and attempts are left, else dead-lettered, audited as Fail does. The
// backoffs come from RetryBackoff, one per attempt count up to the one where it
// reaches its ceiling.
const pgFail = `WITH changed AS (UPDATE todos SET
		state = CASE WHEN ? AND attempts < max_attempts THEN 'pending' ELSE 'failed' END,
		available_at = CASE WHEN ? AND attempts < max_attempts
			THEN ? + (?::bigint[])[least(attempts, ?) + 1] ELSE available_at END,
		finished_at = CASE WHEN ? AND attempts < max_attempts THEN finished_at ELSE ? END,
		owner = NULL, lease_expires_at = NULL, reserved_for = NULL, last_error = ?, updated_at = ?
		WHERE ` + pgLeaseHeld + ` RETURNING ` + todoColumns + `),
	logged AS (INSERT INTO audit (at, actor, action, target, outcome, detail)
		SELECT ?, ?, CASE WHEN state = 'pending' THEN 'todo.fail' ELSE 'todo.dead_letter' END, 'todo:' || id,
			CASE WHEN state = 'pending' THEN 'retry' ELSE 'ok' END, ? FROM changed RETURNING id, at),
	` + pgKeyNext + pgKeyedOutcome

// pgBackoffs is RetryBackoff in milliseconds for 0, 1, … attempts, up to the
// first count that gets the ceiling.
var pgBackoffs = func() []int64 {
	var out []int64
	for n := 0; ; n++ {
		out = append(out, RetryBackoff(n).Milliseconds())
		if RetryBackoff(n) == RetryBackoff(n+1000) {
			return out
		}
	}
}()

// pgFailArgs are pgFail's arguments: a failed with errText at (unix ms), to be
// retried if retry.
func pgFailArgs(a Ack, errText string, retry bool, at int64) []any {
	set := []any{retry, retry, at, pgBackoffs, len(pgBackoffs) - 1, retry, at, errText, at}
	return append(append(set, pgLeaseArgs(a, at)...), at, a.Owner, textcut.Bytes(errText, 200), at, a.ID)
}

func (s *Store) pgFailReq(ctx context.Context, a Ack, errText string, retry bool, t *Todo) *writeReq {
	args := func(now time.Time) []any { return pgFailArgs(a, errText, retry, ms(now)) }
	return s.oneReq(ctx, &pgOne{query: pgFail, args: args, ack: a.ID, read: func(w *wtx, row scanner) error {
		failed, err := w.keyedOutcome(a, "fail", row)
		if *t = failed; err != nil {
			return err
		}
		if t.State == StatePending {
			// Pending, but not claimable before available_at: the doorbell rings then.
			w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StatePending, Source: t.Source.Type,
				ClaimableAt: t.AvailableAt, Cause: "retry_backoff"})
			return nil
		}
		w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StateFailed, Source: t.Source.Type, Cause: "dead_letter"})
		return nil
	}})
}

// pgRelease is Release's statement.
const pgRelease = `WITH changed AS (UPDATE todos SET state = 'pending', owner = NULL, lease_expires_at = NULL,
		attempts = greatest(attempts - 1, 0), available_at = ?, updated_at = ?
		WHERE ` + pgLeaseHeld + ` RETURNING ` + todoColumns + `),
	logged AS (INSERT INTO audit (at, actor, action, target, outcome, detail)
		SELECT ?, ?, 'todo.release', 'todo:' || id, 'ok', '' FROM changed RETURNING id)
	` + pgLeaseOutcome

// pgReleaseArgs are pgRelease's arguments: a released at (unix ms).
func pgReleaseArgs(a Ack, at int64) []any {
	return append(append([]any{at, at}, pgLeaseArgs(a, at)...), at, a.Owner, a.ID)
}

// pgRelease is Release in one statement. It is not pipelined: the watch of this
// process's own returns must hold its audit row's id before the COMMIT is sent.
func (s *Store) pgRelease(ctx context.Context, a Ack) (t Todo, err error) {
	err = s.write(ctx, func(w *wtx) error {
		released, auditID, err := w.leaseOutcomeAudited(a, "release", w.queryRow(pgRelease, pgReleaseArgs(a, ms(w.now))...))
		if err != nil {
			return err
		}
		t = released
		w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StatePending, Source: t.Source.Type,
			Claimable: true, Cause: "release", auditID: auditID})
		return nil
	})
	return t, err
}
