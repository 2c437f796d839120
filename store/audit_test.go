package store

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// A row stamped far ahead (a clock that was wrong) does not stop the pruning of
// the old rows after it.
func TestPruneAuditPastAFutureStampedRow(t *testing.T) {
	s := openTest(t, Options{Synchronous: SyncNormal})
	ctx := context.Background()
	old := s.now().Add(-48 * time.Hour)
	err := s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`INSERT INTO audit (at, actor, action) VALUES (?, 'system', 'clock.wrong')`,
			ms(s.now().Add(365*24*time.Hour))); err != nil {
			return err
		}
		_, err := w.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 2500)
			INSERT INTO audit (at, actor, action) SELECT ?, 'agent:a', 'todo.add' FROM n`, ms(old))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "{}"}); err != nil { // one recent row
		t.Fatal(err)
	}
	n, err := s.PruneAudit(ctx, s.now().Add(-24*time.Hour))
	if err != nil || n != 2501 {
		t.Fatalf("pruned %d, %v; want the 2,500 old rows and the wrongly stamped one", n, err)
	}
	rows, _ := s.ListAudit(ctx, AuditFilter{Action: "todo.add"})
	if len(rows) != 1 || rows[0].Target == "" {
		t.Fatalf("left %+v, want only the recent todo's row", rows)
	}
	if n, err := s.PruneAudit(ctx, s.now().Add(-24*time.Hour)); err != nil || n != 0 {
		t.Fatalf("a second pass pruned %d, %v", n, err)
	}
}

// Listing by an action prefix ("todo.") gives the rows a scan would, newest first
// and a page at a time, with an actor filter too; "todo." is not "todos." or "todo".
func TestListAuditByPrefix(t *testing.T) {
	s := openTest(t, Options{Synchronous: SyncNormal})
	ctx := context.Background()
	actions := []string{"todo.add", "todo.claim", "human.login", "todo.complete", "todos.other", "todo", "todo.add", "todo.zz"}
	err := s.write(ctx, func(w *wtx) error {
		for i := range 60 {
			actor := []string{"agent:a", "agent:b", "human:1"}[i%3]
			if err := w.audit(actor, actions[i%len(actions)], fmt.Sprintf("t:%d", i), "", ""); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	all, err := s.ListAudit(ctx, AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, actor := range []string{"", "agent:b"} {
		var want []int64
		for _, e := range all {
			if strings.HasPrefix(e.Action, "todo.") && (actor == "" || e.Actor == actor) {
				want = append(want, e.ID)
			}
		}
		if got := auditPages(t, s, AuditFilter{Action: "todo.", Actor: actor, Limit: 7}, nil); !slices.Equal(got, want) {
			t.Fatalf("actor %q: pages of todo. gave %v, want %v", actor, got, want)
		}
	}
}

// A filter by actor and action reads the index of whichever matches fewer rows:
// an operator's few rows, not every row of an action agents write all day. Both
// past the probe's cap, SQLite chooses. The rows are those a scan would give,
// paged.
func TestListAuditByActorAndActionReadsTheRarerIndex(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 6,000 audit rows and the plans read over them, which the race detector makes 20 s")
	}
	s := openTest(t, Options{Synchronous: SyncNormal})
	ctx := context.Background()
	err := s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < ?)
			INSERT INTO audit (at, actor, action, target) SELECT i, CASE WHEN i % 2 = 0 THEN 'agent:bot' ELSE 'agent:two' END,
				CASE WHEN i % 500 = 0 THEN 'todo.fail' ELSE 'todo.complete' END, 'todo:' || i FROM n`, 3*auditProbeCap); err != nil {
			return err
		}
		for i := range 3 {
			if err := w.audit("human:1", "todo.retry", fmt.Sprintf("todo:%d", i), "", ""); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		f    AuditFilter
		want string
	}{
		{AuditFilter{Actor: "human:1", Action: "todo.complete"}, "audit_actor"},
		{AuditFilter{Actor: "human:1", Action: "todo.retry"}, "audit_actor"},
		{AuditFilter{Actor: "agent:bot", Action: "todo.fail"}, "audit_action"},
		{AuditFilter{Actor: "agent:bot", Action: "todo.retry"}, "audit_action"},
		{AuditFilter{Actor: "agent:bot", Action: "todo.complete"}, ""},
		// Below the cursor, agent:bot has fewer rows than the cap.
		{AuditFilter{Actor: "agent:bot", Action: "todo.complete", Before: 1000}, "audit_actor"},
	} {
		if got, err := s.rarerAuditIndex(ctx, c.f); err != nil || got != c.want {
			t.Errorf("%+v: index %q, %v; want %q", c.f, got, err, c.want)
		}
		if c.want != "" && !s.pg { // SQLite's plans; PostgreSQL takes no hints
			c.f.Limit = 100
			q, args := auditListQuery(c.f, c.want)
			if plan := queryPlan(t, s, q, args...); len(plan) != 1 || !strings.Contains(plan[0], "INDEX "+c.want+" ") {
				t.Errorf("%+v: plan %q, want one search of %s", c.f, plan, c.want)
			}
		}
	}
	all, err := s.ListAudit(ctx, AuditFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []AuditFilter{{Actor: "human:1", Action: "todo.retry"}, {Actor: "agent:bot", Action: "todo.fail"},
		{Actor: "human:1", Action: "todo.complete"}, {Actor: "agent:two", Action: "todo.complete", Before: all[len(all)-1].ID}} {
		want := auditPages(t, s, AuditFilter{Before: f.Before, Limit: 1000}, func(e AuditEntry) bool {
			return e.Actor == f.Actor && e.Action == f.Action
		})
		f.Limit = 5
		if got := auditPages(t, s, f, nil); !slices.Equal(got, want) || (f.Action != "todo.complete" && len(want) == 0) {
			t.Errorf("%+v: pages gave %d rows, a scan %d", f, len(got), len(want))
		}
	}
}

// auditPages lists f page by page (f.Limit rows each) from f.Before on, and returns
// the ids of the rows keep keeps (every row when nil).
func auditPages(t *testing.T, s *Store, f AuditFilter, keep func(AuditEntry) bool) []int64 {
	t.Helper()
	var ids []int64
	for {
		page, err := s.ListAudit(context.Background(), f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			if keep == nil || keep(e) {
				ids = append(ids, e.ID)
			}
		}
		if len(page) < f.Limit {
			return ids
		}
		f.Before = page[len(page)-1].ID
	}
}
