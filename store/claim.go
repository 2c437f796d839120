package store

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"
)

// Claims: claim_next takes the head of a queue (highest priority, then oldest,
// skipping todos that wait behind their key), gated by paused queues and by a
// todo reserved for the worker after a human's decision (pause.go, approval.go).

// ClaimNext claims the oldest claimable todo in any of queues for owner. ok is false
// when nothing is claimable.
func (s *Store) ClaimNext(ctx context.Context, owner string, queues []string, ttl time.Duration) (t Todo, ok bool, err error) {
	var out claimed
	if err = s.submit(ctx, s.claimReq(ctx, owner, queues, ttl, nil, &out)); err != nil {
		return Todo{}, false, err // whatever a run rolled back left in out
	}
	return out.t, out.ok, nil
}

// claimed is what a claim found: ok is false when nothing was claimable.
type claimed struct {
	t  Todo
	ok bool
}

// claimReq is ClaimNext's write. after, when set, is the ack of the write this
// claim follows in its transaction (submitThen), which a claim pipelined on
// PostgreSQL checks for itself (pgClaimAfter).
func (s *Store) claimReq(ctx context.Context, owner string, queues []string, ttl time.Duration, after *Ack, out *claimed) *writeReq {
	if s.pg && len(queues) == 1 {
		return s.pgClaimOneReq(ctx, owner, queues[0], ttl, after, out)
	}
	return againReq(ctx, func(w *wtx) error {
		*out = claimed{} // a batch that runs again runs this again
		t, ok, err := w.claimNext(owner, queues, ttl)
		if err == nil {
			*out = claimed{t, ok}
		}
		return err
	})
}

// claimNext is ClaimNext inside the writer's transaction.
func (w *wtx) claimNext(owner string, queues []string, ttl time.Duration) (t Todo, ok bool, err error) {
	queues, reserved, err := w.gate(owner, queues)
	if err != nil {
		return t, false, err
	}
	if reserved != 0 {
		if t, ok, err = w.claimReserved(reserved, owner, queues, ttl); ok || err != nil {
			return t, ok, err
		}
	}
	if w.w.s.pg {
		return w.pgClaimNext(owner, queues, ttl)
	}
	now := ms(w.now)
	var best queueHead
	// One index probe per queue (todos_ready): the cost does not grow with
	// the depth of the queue, nor with the todos waiting behind held keys.
	for _, q := range queues {
		h, found, err := w.queueHead(q, now)
		if err != nil {
			return t, false, err
		}
		if found && (best.id == 0 || h.before(best)) {
			best = h
		}
	}
	if best.id == 0 {
		return t, false, nil
	}
	t, err = w.claim(best.id, owner, ttl, "todo.claim_next")
	return t, err == nil, err
}

// pgHead is a queue's head on PostgreSQL, which has no INDEXED BY: read by
// todos_heads (migration 0021), which only todos_ready can serve, one probe as
// on SQLite. Left to its estimates, PostgreSQL walked the primary key past every
// todo claimed or done since its statistics were taken, or read and sorted every
// pending todo of the queue (TestEachHeadIsAProbeWhateverTheStatistics).
// pgClaimHead locks its head by todos_lock_heads; pgClaimGated and pgClaimSet by
// todos_lock_claims, which calls it.
const pgHead = `SELECT id, priority FROM todos_heads(?, ?, 1)`

// pgHeadArgs are the arguments of todos_heads and todos_lock_heads before their
// count: queue q at now (unix ms).
func pgHeadArgs(q string, now int64) []any { return []any{q, now} }

// queueHead is the todo claim_next takes next on a queue: the first by priority
// (highest), then id (oldest).
type queueHead struct {
	id       int64
	priority int
}

// before reports whether h is taken before o.
func (h queueHead) before(o queueHead) bool {
	return h.priority > o.priority || (h.priority == o.priority && h.id < o.id)
}

// queueHead is the head of queue q at now (unix ms), read without a lock: one
// probe of todos_ready.
func (w *wtx) queueHead(q string, now int64) (h queueHead, found bool, err error) {
	if w.w.s.pg {
		err = w.queryRow(pgHead, pgHeadArgs(q, now)...).Scan(&h.id, &h.priority)
	} else {
		err = w.queryRow(`SELECT id, priority FROM todos INDEXED BY todos_ready
		WHERE state = 'pending' AND key_waiting = 0 AND queue = ? AND available_at <= ?
		ORDER BY priority DESC, id LIMIT 1`, q, now).Scan(&h.id, &h.priority)
	}
	if notFound(err) {
		return h, false, nil
	}
	if err != nil {
		return h, false, fmt.Errorf("store: claim next in %s: %w", q, err)
	}
	return h, true, nil
}

// pgClaimNext is ClaimNext on PostgreSQL, where other processes claim from the
// same queues in transactions beside this one. The head is taken FOR UPDATE SKIP
// LOCKED: a todo another transaction is claiming is passed over rather than
// waited for, and one that transaction claimed meanwhile fails the re-check of
// state and available_at that PostgreSQL makes under the lock, so no todo is
// claimed twice. With several queues, their heads read without locks say which
// queue to try first (the oldest head); a queue whose head went to someone else
// in between gives way to the next.
func (w *wtx) pgClaimNext(owner string, queues []string, ttl time.Duration) (Todo, bool, error) {
	now := ms(w.now)
	order := queues
	if len(queues) > 1 {
		type head struct {
			queue string
			queueHead
		}
		var heads []head
		for _, q := range queues {
			h, found, err := w.queueHead(q, now)
			if err != nil {
				return Todo{}, false, err
			}
			if found {
				heads = append(heads, head{q, h})
			}
		}
		slices.SortFunc(heads, func(a, b head) int {
			return cmp.Or(cmp.Compare(b.priority, a.priority), cmp.Compare(a.id, b.id))
		})
		order = make([]string, len(heads))
		for i, h := range heads {
			order[i] = h.queue
		}
	}
	for _, q := range order {
		t, err := w.w.s.scanFull(w.queryRow(pgClaimHead, pgClaimHeadArgs(q, owner, now, ms(w.now.Add(ttl)))...))
		if notFound(err) {
			continue
		}
		if err != nil {
			return Todo{}, false, fmt.Errorf("store: claim next in %s: %w", q, err)
		}
		w.changed(TodoChange{ID: t.ID, Queue: t.Queue, State: StateClaimed, Source: t.Source.Type, Cause: "claim"})
		return t, true, nil
	}
	return Todo{}, false, nil
}

// pgClaimHead claims a queue's head in one round trip: it locks the head
// (todos_lock_heads, FOR UPDATE SKIP LOCKED), claims it as claim does, and writes the
// audit row claim writes (same actor, action, target and detail). No row when
// the queue has nothing claimable that is not locked by someone else.
const pgClaimHead = `WITH head AS (SELECT id FROM todos_lock_heads(?, ?, 1)),
	claimed AS (UPDATE todos SET state = 'claimed', owner = ?, attempts = attempts + 1,
			lease_seq = lease_seq + 1, lease_expires_at = ?, updated_at = ?, reserved_for = NULL
		WHERE id = (SELECT id FROM head) AND state = 'pending' RETURNING ` + pgTodoColumnsFull + `),
	logged AS (INSERT INTO audit (at, actor, action, target, outcome, detail)
		SELECT ?, ?, 'todo.claim_next', 'todo:' || id, 'ok',
			'attempt=' || attempts || ' lease_seq=' || lease_seq FROM claimed)
	SELECT * FROM claimed`

// pgClaimHeadArgs are pgClaimHead's arguments: a claim of queue q's head by
// owner at now, its lease until expires (both unix ms).
func pgClaimHeadArgs(q, owner string, now, expires int64) []any {
	return append(pgHeadArgs(q, now), owner, expires, now, now, owner)
}
