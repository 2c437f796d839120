package store

import (
	"database/sql"
	"fmt"
	"strconv"
	"time"
)

// Keys. Of the todos of one (queue, key) that are pending or claimed, only the
// oldest, the key's front, has key_waiting = 0; the others wait behind it and
// are not in the claim index (todos_ready). When the front ends (done or dead
// letter), the next waiting todo becomes the front in the same transaction. An
// add deciding to wait and a front ending cannot pass each other: SQLite has one
// writer, and on PostgreSQL every write transaction of every process first
// takes the writer lock (pgWriterLock), so they take turns there too. The unique
// index todos_key_front stands behind that (TestTwoProcessesNeverHoldOneKeyTwice).

// keyHasFront reports whether (queue, key) has a pending or claimed front.
func (w *wtx) keyHasFront(queue, key string) (bool, error) {
	var n int
	err := w.queryRow(`SELECT count(*) FROM todos WHERE queue = ? AND key = ? AND key_waiting = 0
		AND state IN ('pending', 'claimed')`, queue, key).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("store: read key %q on %s: %w", key, queue, err)
	}
	return n > 0, nil
}

// keyNext makes a key's next waiting todo its front. It is claimable from now
// (both arguments) on, not from when it was added: available_at says since
// when, for the board's and /metrics' head wait (QueueHeads); a later one (a
// delay) holds. todos_free_keys (migration 0024) does the same inside a
// transition's statement on PostgreSQL.
const keyNext = `UPDATE todos SET key_waiting = 0, available_at = CASE WHEN available_at < ? THEN ? ELSE available_at END
	WHERE id = (SELECT id FROM todos WHERE queue = ? AND key = ? AND state = 'pending' AND key_waiting = 1 ORDER BY id LIMIT 1)
	RETURNING id, source_type, available_at`

// keyEnded moves the front of t's key to its next waiting todo, if any, after t
// (the front) ended. The next one becomes claimable: the doorbell rings then.
func (w *wtx) keyEnded(t Todo) error {
	if t.Key == "" || t.KeyWaiting {
		return nil
	}
	var next Todo
	var avail sql.NullInt64
	err := w.queryRow(keyNext, ms(w.now), ms(w.now), t.Queue, t.Key).Scan(&next.ID, &next.Source.Type, &avail)
	if notFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store: free key %q on %s: %w", t.Key, t.Queue, err)
	}
	auditID, err := w.auditRow("system", "todo.key_free", todoTarget(next.ID), "", "")
	if err != nil {
		return err
	}
	w.keyFreed(next.ID, t.Queue, next.Source.Type, fromMS(avail.Int64), auditID)
	return nil
}

// keyFreed announces todo id, its key's new front. The audit row of the move
// (todo.key_free) is how other processes' watches hear of it, as of a todo
// returned to its queue (see returnCauses), and its id tells this process's
// own watch that it was announced here already.
func (w *wtx) keyFreed(id int64, queue, source string, available time.Time, auditID int64) {
	c := pendingChange(id, queue, source, available, "key_free", w.now)
	c.auditID = auditID
	w.changed(c)
}

// announcePending announces a todo that is pending and at its key's front:
// claimable now, or rung when available comes.
func (w *wtx) announcePending(id int64, queue, source string, available time.Time, cause string) {
	w.changed(pendingChange(id, queue, source, available, cause, w.now))
}

func pendingChange(id int64, queue, source string, available time.Time, cause string, now time.Time) TodoChange {
	c := TodoChange{ID: id, Queue: queue, State: StatePending, Source: source, Cause: cause}
	if available.After(now) {
		c.ClaimableAt = available
	} else {
		c.Claimable = true
	}
	return c
}

// foldTarget is the newest pending todo of (queue, key), which a coalescing add
// folds into (one probe of todos_key_pending); found is false when the key has
// none, or when that todo carries a human's decision (approved or denied): the
// decision was about it as it is, so it is not rewritten, and the add waits
// behind it as a todo of its own. (A pending todo holds no unanswered question:
// a release or retry withdraws it.)
func (w *wtx) foldTarget(queue, key string) (t Todo, found bool, err error) {
	var a, c int64
	var approval string
	err = w.queryRow(`SELECT id, available_at, created_at, coalesced, key_waiting, priority,
			coalesce(source_event_id, 0), approval FROM todos
		WHERE queue = ? AND key = ? AND state = 'pending' ORDER BY id DESC LIMIT 1`, queue, key).
		Scan(&t.ID, &a, &c, &t.Coalesced, &t.KeyWaiting, &t.Priority, &t.Source.EventID, &approval)
	if notFound(err) {
		return Todo{}, false, nil
	}
	if err != nil {
		return Todo{}, false, fmt.Errorf("store: read key %q on %s: %w", key, queue, err)
	}
	if approval != "" {
		return Todo{}, false, nil
	}
	t.AvailableAt, t.CreatedAt = fromMS(a), fromMS(c)
	return t, true, nil
}

// fold folds n into the pending todo of its key, if there is one: that todo takes
// n's payload, source and trust, counts one more coalesced, keeps the higher
// priority, and restarts its debounce. ok is false when the key has no pending
// todo, or none without a human's decision (or it was claimed meanwhile): n is
// then added as a todo of its own.
//
// This is a coalesced delivery's hottest statement: the UPDATE returns nothing
// (a RETURNING of the row cost as much again as the rest of the fold), and the
// todo is read back whole only for callers that show it (not ingestion).
func (w *wtx) fold(n NewTodo, size int) (t Todo, ok bool, err error) {
	o := n.Options
	t, found, err := w.foldTarget(n.Queue, o.Key)
	if err != nil || !found {
		return Todo{}, false, err
	}
	id, ownPayload, was := t.ID, t.Source.EventID == 0, t.AvailableAt
	t.AvailableAt, t.Priority = o.debounced(t.AvailableAt, t.CreatedAt, w.now), max(t.Priority, o.Priority)
	res, err := w.exec(`UPDATE todos SET payload_size = ?, source_type = ?, source_webhook_id = ?,
			source_event_id = ?, source_event_type = ?, verified = ?, trust_mode = ?, webhook_created_by = ?,
			coalesced = coalesced + 1, priority = ?, available_at = ?, updated_at = ?
		WHERE id = ? AND state = 'pending' AND approval = ''`,
		size, n.Source.Type, nullID(n.Source.WebhookID), nullID(n.Source.EventID), n.Source.EventType,
		boolInt(n.Trust.Verified), n.Trust.Mode, n.Trust.WebhookCreatedBy, t.Priority, ms(t.AvailableAt), ms(w.now), id)
	if err != nil {
		return Todo{}, false, fmt.Errorf("store: coalesce into todo %d: %w", id, err)
	}
	if rows, err := res.RowsAffected(); err != nil || rows == 0 {
		return Todo{}, false, err // claimed since it was read (PostgreSQL): n waits behind it
	}
	t.Coalesced++
	if err := w.foldPayload(id, n, ownPayload); err != nil {
		return Todo{}, false, err
	}
	if _, err := w.exec(`INSERT INTO queue_flow (queue, coalesced) VALUES (?, 1)
		ON CONFLICT (queue) DO UPDATE SET coalesced = queue_flow.coalesced + 1`, n.Queue); err != nil {
		return Todo{}, false, fmt.Errorf("store: coalesce into todo %d: count: %w", id, err)
	}
	detail := "coalesced=" + strconv.Itoa(t.Coalesced) + " source=" + n.Source.Type
	if n.Source.EventID != 0 {
		detail += " event=" + strconv.FormatInt(n.Source.EventID, 10)
	}
	switch {
	case !t.KeyWaiting && t.AvailableAt.After(was) && t.AvailableAt.After(w.now):
		// Debounced: it becomes claimable later than other processes timed it.
		// Its audit row (outcome debounce) is how they hear of it, as of a
		// return to the queue (see requeued), and time their wake-up again.
		if err := w.requeuedAs(pendingChange(id, n.Queue, n.Source.Type, t.AvailableAt, "coalesce", w.now),
			n.CreatedBy, "todo.coalesce", outcomeDebounce, detail); err != nil {
			return Todo{}, false, err
		}
	default:
		if err := w.audit(n.CreatedBy, "todo.coalesce", todoTarget(id), "", detail); err != nil {
			return Todo{}, false, err
		}
		if !t.KeyWaiting {
			w.announcePending(id, n.Queue, n.Source.Type, t.AvailableAt, "coalesce")
		}
	}
	if n.idOnly {
		return Todo{ID: id}, true, nil
	}
	t, err = scanTodo(w.queryRow(`SELECT `+todoColumns+` FROM todos WHERE id = ?`, id), false)
	if err != nil {
		return Todo{}, false, fmt.Errorf("store: coalesce into todo %d: read it back: %w", id, err)
	}
	return t, true, nil
}

// foldPayload gives todo id n's payload: its own row, or none when the payload
// is n's event's body. ownPayload says whether the todo may have a row of its
// own now: one that read its payload from its event has none (insertPayload),
// so in a burst of deliveries nothing is deleted.
func (w *wtx) foldPayload(id int64, n NewTodo, ownPayload bool) error {
	if ownPayload {
		if _, err := w.exec(`DELETE FROM todo_payloads WHERE todo_id = ?`, id); err != nil {
			return fmt.Errorf("store: coalesce into todo %d: payload: %w", id, err)
		}
	}
	return w.insertPayload(id, n)
}

// insertPayload keeps n's payload for todo id unless the todo reads it from its
// event's body.
func (w *wtx) insertPayload(id int64, n NewTodo) error {
	if n.Source.EventID != 0 || n.Payload == "" {
		return nil
	}
	payload := n.Payload
	if w.w.s.pg {
		payload = pgPayloadIn(payload)
	}
	return w.later("store: add todo to "+n.Queue+": payload", `INSERT INTO todo_payloads (todo_id, payload) VALUES (?, ?)`, id, payload)
}

// keyWaitingOnReturn is, for a todo of key on queue going back to pending from
// an end (a dead letter retried), whether it must wait behind a front.
func (w *wtx) keyWaitingOnReturn(id int64) (bool, error) {
	var queue string
	var key sql.NullString
	if err := w.queryRow(`SELECT queue, key FROM todos WHERE id = ?`, id).Scan(&queue, &key); err != nil {
		return false, fmt.Errorf("store: read todo %d: %w", id, err)
	}
	if !key.Valid {
		return false, nil
	}
	return w.keyHasFront(queue, key.String)
}
