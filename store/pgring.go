package store

import (
	"encoding/json"
	"slices"
	"strings"
	"time"
)

// Rings across processes on PostgreSQL. A write transaction that adds todos or
// returns them to their queue sends, beside its usual notification (pgNotify), a
// second one whose payload lists those changes (pgNotifyRing): another process's
// listener rings its agents from the payload at once, with no round trip to the
// database. The scan that every notification wakes still runs and finds the same
// rows: what a ring announced, the scan skips, and what the scan announced first,
// a late ring skips (see ownChanges.ringable and pass). A commit whose changes do
// not fit in a payload sends none: the scan alone announces them, a few round
// trips later. So a ring is a shortcut, never the only way: a lost notification
// still only delays a wake-up.
//
// A pipelined batch (pipeline.go) neither adds nor returns todos, and sends no ring.

// pgNotifyRing is pgNotify with the ring's notification first, so that a listener
// rings before the scan it wakes starts. The channel is the database's, shared
// by every schema in it: the payload names the schema its todos are in.
const pgNotifyRing = `SELECT pg_notify('switchboard', 'ring ' || current_schema() || chr(10) || $2),
	pg_notify('switchboard', $1)`

// ringPrefix starts a ring's payload: then the schema, a newline and a JSON
// array of ringEntry. Any other payload (a process of an older version sends
// only "todos" or "") is a plain wake-up.
const ringPrefix = "ring "

// maxRingPayload keeps a ring's JSON, with its prefix and a schema's name (63
// bytes at most), under PostgreSQL's limit on a payload (8,000 bytes).
const maxRingPayload = 7800

// ringEntry is one TodoChange in a ring's payload: an add or a return to the queue.
type ringEntry struct {
	ID          int64  `json:"i"`
	Queue       string `json:"q"`
	Source      string `json:"s,omitempty"`
	State       string `json:"st"`
	Claimable   bool   `json:"c,omitempty"`
	ClaimableAt int64  `json:"at,omitempty"` // ms; a delayed add, a retry's backoff
	Cause       string `json:"w"`
	AuditID     int64  `json:"a,omitempty"` // a return's audit row
}

// ringPayload is the ring's JSON for a batch about to commit: its requests' adds
// and returns; "" when it has none or they do not fit.
func ringPayload(batch []*writeReq) string {
	var entries []ringEntry
	for _, r := range batch {
		if r.err != nil {
			continue
		}
		for _, c := range r.wtx.changes {
			if c.Cause != "add" && c.auditID == 0 {
				continue
			}
			e := ringEntry{ID: c.ID, Queue: c.Queue, Source: c.Source, State: c.State, Claimable: c.Claimable,
				Cause: c.Cause, AuditID: c.auditID}
			if !c.ClaimableAt.IsZero() {
				e.ClaimableAt = ms(c.ClaimableAt)
			}
			entries = append(entries, e)
		}
	}
	if len(entries) == 0 || len(entries)*40 > maxRingPayload {
		return ""
	}
	b, err := json.Marshal(entries)
	if err != nil || len(b) > maxRingPayload {
		return ""
	}
	return string(b)
}

// ringFrom rings for a ring's payload from another process: the changes that
// neither this process made nor the scan announced already, if they are in
// schema, this store's. It reports whether payload was a ring at all.
func (s *Store) ringFrom(payload, schema string) bool {
	rest, ok := strings.CutPrefix(payload, ringPrefix)
	if !ok {
		return false
	}
	in, body, _ := strings.Cut(rest, "\n")
	if in != schema || schema == "" {
		return true // another schema's todos, in the same database
	}
	var entries []ringEntry
	if err := json.Unmarshal([]byte(body), &entries); err != nil {
		return true // not one this version reads: the scan it wakes announces the changes
	}
	var changes []TodoChange
	for _, e := range entries {
		if !s.own.ringable(e.ID, e.AuditID) {
			continue
		}
		c := TodoChange{ID: e.ID, Queue: e.Queue, Source: e.Source, State: e.State, Claimable: e.Claimable, Cause: e.Cause}
		if e.ClaimableAt != 0 {
			c.ClaimableAt = fromMS(e.ClaimableAt)
		}
		if e.AuditID != 0 && !c.ClaimableAt.IsZero() && e.Cause != "approval_decided" {
			// A failure with a retry, or a key's next todo not yet available: as
			// the scan does (announceReturned), its wait is timed here too, and it
			// rings when that ends, with the scan's cause (returnCauses).
			at := c.ClaimableAt
			c.ClaimableAt, c.Claimable = time.Time{}, true
			if c.Cause == "retry_backoff" {
				c.Cause = "backoff_over"
			}
			if at.After(s.now()) {
				s.wakeAt(at, c)
				continue
			}
		}
		changes = append(changes, c)
	}
	if len(changes) > 0 {
		// The ring comes before the watch reads what its commit changed.
		s.creds.rang()
	}
	s.fire(changes)
	return true
}

// ringable reports whether a ring may announce the add of todo id (audit 0) or
// the return audited as row audit, and if so notes it as announced, for the scan
// to skip. Not if this process made it, a ring announced it already, or the scan
// has looked past it; nor while no watch runs.
func (o *ownChanges) ringable(id, audit int64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	set, mark, key := o.adds, o.addsMark, id
	if audit != 0 {
		set, mark, key = o.returns, o.returnsMark, audit
	}
	if set == nil {
		return false
	}
	if _, gap := mark.gaps[key]; key <= mark.last && !gap {
		return false
	}
	if _, ok := set[key]; ok {
		return false
	}
	set[key] = struct{}{}
	return true
}

// passAdds and passReturns publish next as how far the scan of adds (todo ids)
// or returns (audit row ids) has looked, and keep, of the ids it is about to
// announce, those neither this process made nor a ring announced. Both are one
// step under the lock, so that a ring and the scan never both announce an id.
func (o *ownChanges) passAdds(next idMark, ids []int64) (keep []bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.addsMark = next
	return unheld(o.adds, ids)
}

func (o *ownChanges) passReturns(next idMark, ids []int64) (keep []bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.returnsMark = next
	return unheld(o.returns, ids)
}

// unheld reports, for each of ids, whether set lacks it.
func unheld(set map[int64]struct{}, ids []int64) []bool {
	keep := slices.Repeat([]bool{true}, len(ids))
	for i, id := range ids {
		if _, ok := set[id]; ok {
			keep[i] = false
		}
	}
	return keep
}
