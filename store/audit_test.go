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
		var got []int64
		for before := int64(0); ; {
			page, err := s.ListAudit(ctx, AuditFilter{Action: "todo.", Actor: actor, Before: before, Limit: 7})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range page {
				got = append(got, e.ID)
			}
			if len(page) < 7 {
				break
			}
			before = page[len(page)-1].ID
		}
		if !slices.Equal(got, want) {
			t.Fatalf("actor %q: pages of todo. gave %v, want %v", actor, got, want)
		}
	}
}
