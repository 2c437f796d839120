package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// badRead is a write whose statement adds an audit row of action and returns a
// row its read cannot scan, as a read that disagrees with its statement would.
func badRead(s *Store, action string, set *pgSetKind) func(context.Context) error {
	return func(ctx context.Context) error {
		one := &pgOne{query: `WITH logged AS (INSERT INTO audit (at, actor, action, target, outcome, detail)
				VALUES (0, 'test', ?, 'x', 'ok', '')) SELECT 'not a number'`,
			args: func(time.Time) []any { return []any{action} },
			read: func(_ *wtx, row scanner) error { var n int64; return row.Scan(&n) }}
		if set != nil {
			one.set = &pgSetWrite{kind: set, elem: []any{action}}
		}
		return s.writeOne(ctx, one)
	}
}

// A row that its write cannot read, in a pipelined batch, is no failed
// statement: the server has run the batch's COMMIT by then (it was sent with
// the batch), so running the batch again would run each write twice. The
// batch's other writes are answered once; the one whose row could not be read
// says its write was committed.
func TestUnreadableRowDoesNotRunTheBatchTwice(t *testing.T) {
	s := pgProcesses(t, testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))[0]
	ctx := context.Background()
	addTodos(t, s, "inbox", 2)
	var errBad, errClaim error
	var claimed bool
	inOneBatch(t, s,
		func() { errBad = badRead(s, "test.one", nil)(ctx) },
		func() { _, claimed, errClaim = s.ClaimNext(ctx, "agent:c", []string{"inbox"}, time.Minute) })
	if errClaim != nil || !claimed {
		t.Fatalf("claim = %v, %v", claimed, errClaim)
	}
	if errBad == nil || !strings.Contains(errBad.Error(), "committed") {
		t.Errorf("the write whose row could not be read = %v, want an error saying it was committed", errBad)
	}
	var n int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM todos WHERE state = 'claimed'`).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d todos claimed for one claim (%v)", n, err)
	}
	for action, want := range map[string]int{"test.one": 1, "todo.claim_next": 1} {
		if got := auditCount(t, s, action); got != want {
			t.Errorf("%d %s audit rows, want %d", got, action, want)
		}
	}
}

// The same in a set-based statement: its writes are committed once and say so.
func TestUnreadableSetRowsSayTheyWereCommitted(t *testing.T) {
	s := pgProcesses(t, testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))[0]
	ctx := context.Background()
	kind := &pgSetKind{query: `WITH req AS (SELECT * FROM unnest(?::text[]) WITH ORDINALITY AS r(r_v, r_n)),
		logged AS (INSERT INTO audit (at, actor, action, target, outcome, detail)
			SELECT 0, 'test', r_v, 'x', 'ok', '' FROM req)
		SELECT r_n, 'not a number' FROM req`, args: func(_ int64, elems [][]any) []any {
		var vs []string
		for _, e := range elems {
			vs = append(vs, e[0].(string))
		}
		return []any{vs}
	}}
	write := badRead(s, "test.set", kind)
	errs := make([]error, 2)
	inOneBatch(t, s, func() { errs[0] = write(ctx) }, func() { errs[1] = write(ctx) })
	for i, err := range errs {
		if err == nil || !strings.Contains(err.Error(), "committed") {
			t.Errorf("write %d = %v, want an error saying it was committed", i, err)
		}
	}
	if n := auditCount(t, s, "test.set"); n != 2 {
		t.Errorf("%d audit rows for two writes, want 2", n)
	}
}
