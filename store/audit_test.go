package store

import (
	"context"
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
