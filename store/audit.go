package store

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// AuditEntry is one row of the append-only audit log.
type AuditEntry struct {
	ID      int64     `json:"id"`
	At      time.Time `json:"at"`
	Actor   string    `json:"actor"`
	Action  string    `json:"action"`
	Target  string    `json:"target"`
	Outcome string    `json:"outcome"`
	Detail  string    `json:"detail,omitempty"`
}

// Audit appends an entry for an action that changed nothing in the store itself
// (a module call, a login). Actions that change rows audit inside their own write.
func (s *Store) Audit(ctx context.Context, e AuditEntry) error {
	return s.write(ctx, func(w *wtx) error {
		return w.audit(e.Actor, e.Action, e.Target, e.Outcome, e.Detail)
	})
}

// AuditFilter selects audit rows, newest first; Before pages.
type AuditFilter struct {
	Actor  string
	Action string // exact, or a prefix ending in "." (e.g. "todo.")
	Target string
	Before int64
	Limit  int // default 100, at most 1000
}

// ListAudit lists audit rows, newest first.
func (s *Store) ListAudit(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	if f.Limit <= 0 {
		f.Limit = 100
	}
	f.Limit = min(f.Limit, 1000)
	if s.unmatchable(&f.Actor, &f.Action, &f.Target) {
		return nil, nil
	}
	if strings.HasSuffix(f.Action, ".") {
		return s.listAuditUnder(ctx, f)
	}
	index := ""
	// PostgreSQL has no index hints: it plans alone, so it needs no probe.
	if f.Actor != "" && f.Action != "" && f.Target == "" && !s.pg {
		var err error
		if index, err = s.rarerAuditIndex(ctx, f); err != nil {
			return nil, err
		}
	}
	q, args := auditListQuery(f, index)
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list audit: %w", err)
	}
	defer rows.Close()
	var out []AuditEntry
	for rows.Next() {
		var e AuditEntry
		var at int64
		if err := rows.Scan(&e.ID, &at, &e.Actor, &e.Action, &e.Target, &e.Outcome, &e.Detail); err != nil {
			return nil, fmt.Errorf("store: list audit: %w", err)
		}
		e.At = fromMS(at)
		out = append(out, e)
	}
	return out, rows.Err()
}

// auditListQuery builds ListAudit's statement for an exact action (or none) and
// its arguments, read through index when one is named.
func auditListQuery(f AuditFilter, index string) (string, []any) {
	var where []string
	var args []any
	if f.Actor != "" {
		where, args = append(where, "actor = ?"), append(args, f.Actor)
	}
	if f.Action != "" {
		where, args = append(where, "action = ?"), append(args, f.Action)
	}
	if f.Target != "" {
		where, args = append(where, "target = ?"), append(args, f.Target)
	}
	if f.Before > 0 {
		where, args = append(where, "id < ?"), append(args, f.Before)
	}
	q := `SELECT id, at, actor, action, target, outcome, detail FROM audit`
	if index != "" {
		q += " INDEXED BY " + index
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	return q + " ORDER BY id DESC LIMIT ?", append(args, f.Limit)
}

// auditProbeCap bounds how many rows rarerAuditIndex counts on each side.
const auditProbeCap = 2000

// rarerAuditIndex says which index to read a filter by actor and action through:
// the one whose value matches fewer rows, counted on the index alone up to
// auditProbeCap; "" when both reach it, for SQLite to choose. Its statistics know
// how many rows an actor or an action has on average, not this one's: an operator
// with 24 rows, filtered with an action of 119,000, had every row of that action
// read (134 ms at 360,000 rows) to find none of theirs.
func (s *Store) rarerAuditIndex(ctx context.Context, f AuditFilter) (string, error) {
	before := f.Before
	if before <= 0 {
		before = math.MaxInt64
	}
	var byActor, byAction int
	err := s.queryRow(ctx, `SELECT
			(SELECT count(*) FROM (SELECT 1 FROM audit INDEXED BY audit_actor WHERE actor = ? AND id < ? LIMIT ?) AS a),
			(SELECT count(*) FROM (SELECT 1 FROM audit INDEXED BY audit_action WHERE action = ? AND id < ? LIMIT ?) AS b)`,
		f.Actor, before, auditProbeCap, f.Action, before, auditProbeCap).Scan(&byActor, &byAction)
	if err != nil {
		return "", fmt.Errorf("store: list audit: %w", err)
	}
	switch {
	case byActor == auditProbeCap && byAction == auditProbeCap:
		return "", nil
	case byActor <= byAction:
		return "audit_actor", nil
	}
	return "audit_action", nil
}

// listAuditUnder lists the rows whose action starts with f.Action (a prefix ending
// in "."), newest first. Read as one range of audit_action, every matching row had
// to be sorted by id (360-680 ms for "todo." at 362,000 rows): instead each action
// under the prefix is read newest first from that index, a page at most, and the
// pages merged. The actions are found by seeking from one to the next.
func (s *Store) listAuditUnder(ctx context.Context, f AuditFilter) ([]AuditEntry, error) {
	end := f.Action[:len(f.Action)-1] + "/"
	var out []AuditEntry
	for after := ""; ; {
		var action sql.NullString
		q := `SELECT min(action) FROM audit WHERE action >= ? AND action < ?`
		from := f.Action
		if after != "" {
			q, from = `SELECT min(action) FROM audit WHERE action > ? AND action < ?`, after
		}
		if err := s.queryRow(ctx, q, from, end).Scan(&action); err != nil {
			return nil, fmt.Errorf("store: list audit: %w", err)
		}
		if !action.Valid {
			break
		}
		one := f
		one.Action = action.String
		rows, err := s.ListAudit(ctx, one)
		if err != nil {
			return nil, err
		}
		out = append(out, rows...)
		after = action.String
	}
	slices.SortFunc(out, func(a, b AuditEntry) int { return cmp.Compare(b.ID, a.ID) })
	return out[:min(len(out), f.Limit)], nil
}

// PruneAudit deletes audit rows written before cutoff, oldest first, in bounded
// chunks, and returns how many went. The log is append-only unless its owner
// asks for this (serve's --audit-retention): on a small disk a busy queue adds
// three rows per todo for ever. Ids grow with time, so the rows to delete are
// those before the first row written at or after cutoff. That boundary is found
// once, scanning from the oldest row (a pass with nothing to delete reads one),
// and then deleted up to in short writes. A row stamped more than a day ahead of
// now (a clock that was wrong) does not count as the boundary.
func (s *Store) PruneAudit(ctx context.Context, cutoff time.Time) (int64, error) {
	var boundary sql.NullInt64
	err := s.queryRow(ctx, `SELECT coalesce(
			(SELECT id FROM audit WHERE at >= ? AND at <= ? ORDER BY id LIMIT 1),
			(SELECT max(id) FROM audit))`, ms(cutoff), ms(s.now().Add(24*time.Hour))).Scan(&boundary)
	if err != nil {
		return 0, fmt.Errorf("store: prune audit rows: find the oldest row to keep: %w", err)
	}
	if !boundary.Valid {
		return 0, nil // no audit rows at all
	}
	return s.prune(ctx, "audit rows", "audit.prune", 1000, `DELETE FROM audit WHERE id IN (
		SELECT id FROM audit WHERE id < ? ORDER BY id LIMIT 1000)`, boundary.Int64)
}
