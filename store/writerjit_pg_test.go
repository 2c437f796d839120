package store

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// The writer's statements are never compiled by PostgreSQL's JIT. A write
// transaction plans without sequential scans (pgWriterPlanning), which
// PostgreSQL does by adding 10¹⁰ to a scan's cost; a statement that no index
// serves still scans, and its cost, over every JIT threshold, had it compiled,
// inlined and optimised on each run: 17 to 110 ms for the DELETE of a
// two-row table that each serve process runs every 2 seconds (ProcessBeat),
// holding the fleet's writer lock meanwhile. The statement here is that one, run
// by the writer through EXPLAIN ANALYZE, whose report names the JIT when it ran.
func TestTheWriterNeverCompilesAStatement(t *testing.T) {
	s := pgStore(t)
	ctx := context.Background()
	var available bool
	if err := s.rdb.QueryRowContext(ctx, `SELECT pg_jit_available()`).Scan(&available); err != nil {
		t.Fatal(err)
	}
	if !available {
		if testkit.ExternalRequired() {
			t.Fatal("the PostgreSQL server has no JIT (llvmjit): this test cannot see whether the writer would use it")
		}
		t.Skip("the PostgreSQL server has no JIT (llvmjit): nothing to check")
	}
	var plan string
	err := s.write(ctx, func(w *wtx) (err error) {
		plan, err = planText(w.query(`EXPLAIN (ANALYZE, FORMAT TEXT) DELETE FROM processes WHERE heartbeat_at < ?`, ms(s.now())))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(plan, "JIT") {
		t.Errorf("the writer's DELETE FROM processes was JIT-compiled:\n%s", plan)
	}
}
