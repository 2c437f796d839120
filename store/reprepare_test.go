package store

import (
	"bytes"
	"testing"

	"modernc.org/libc"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// cStatements prepares SQL on a database file through SQLite's C API (as
// transpiled by modernc), which database/sql does not expose: the test reads
// how often SQLite had to parse and plan a statement again.
type cStatements struct {
	t   *testing.T
	tls *libc.TLS
	db  uintptr
}

func openC(t *testing.T, path string) *cStatements {
	t.Helper()
	c := &cStatements{t: t, tls: libc.NewTLS()}
	name, err := libc.CString(path)
	if err != nil {
		t.Fatal(err)
	}
	defer libc.Xfree(c.tls, name)
	pdb := libc.Xmalloc(c.tls, 8)
	defer libc.Xfree(c.tls, pdb)
	if rc := sqlite3.Xsqlite3_open_v2(c.tls, name, pdb, sqlite3.SQLITE_OPEN_READWRITE, 0); rc != sqlite3.SQLITE_OK {
		t.Fatalf("open %s: SQLite error %d", path, rc)
	}
	c.db = libc.AtomicLoadPUintptr(pdb)
	t.Cleanup(func() {
		sqlite3.Xsqlite3_close_v2(c.tls, c.db)
		c.tls.Close()
	})
	return c
}

func (c *cStatements) errmsg() string {
	return libc.GoString(sqlite3.Xsqlite3_errmsg(c.tls, c.db))
}

// reprepares runs query once for each argument list, binding every argument on
// every run as the driver does, and returns how many times SQLite re-prepared it
// after the first run. (The first binding may re-prepare it once, as it did with
// the driver, which keeps its statements prepared: that is paid once.)
func (c *cStatements) reprepares(query string, runs [][]any) int {
	c.t.Helper()
	q, err := libc.CString(query)
	if err != nil {
		c.t.Fatal(err)
	}
	defer libc.Xfree(c.tls, q)
	pst := libc.Xmalloc(c.tls, 8)
	defer libc.Xfree(c.tls, pst)
	if rc := sqlite3.Xsqlite3_prepare_v2(c.tls, c.db, q, -1, pst, 0); rc != sqlite3.SQLITE_OK {
		c.t.Fatalf("prepare: %s", c.errmsg())
	}
	st := libc.AtomicLoadPUintptr(pst)
	defer sqlite3.Xsqlite3_finalize(c.tls, st)
	for run, args := range runs {
		if run == 1 {
			sqlite3.Xsqlite3_stmt_status(c.tls, st, sqlite3.SQLITE_STMTSTATUS_REPREPARE, 1) // reset
		}
		for i, a := range args {
			n := int32(i + 1)
			switch v := a.(type) {
			case nil:
				sqlite3.Xsqlite3_bind_null(c.tls, st, n)
			case int:
				sqlite3.Xsqlite3_bind_int64(c.tls, st, n, int64(v))
			case int64:
				sqlite3.Xsqlite3_bind_int64(c.tls, st, n, v)
			case []byte:
				p, err := libc.CString(string(v)) // a copy in C memory; the length says where it ends
				if err != nil {
					c.t.Fatal(err)
				}
				sqlite3.Xsqlite3_bind_blob(c.tls, st, n, p, int32(len(v)), sqlite3.SQLITE_TRANSIENT)
				libc.Xfree(c.tls, p)
			case string:
				s, err := libc.CString(v)
				if err != nil {
					c.t.Fatal(err)
				}
				sqlite3.Xsqlite3_bind_text(c.tls, st, n, s, int32(len(v)), sqlite3.SQLITE_TRANSIENT)
				libc.Xfree(c.tls, s)
			default:
				c.t.Fatalf("argument %d: %T is not bound by this test", n, a)
			}
		}
		for {
			rc := sqlite3.Xsqlite3_step(c.tls, st)
			if rc == sqlite3.SQLITE_ROW {
				continue
			}
			if rc != sqlite3.SQLITE_DONE {
				c.t.Fatalf("step: %s", c.errmsg())
			}
			break
		}
		sqlite3.Xsqlite3_reset(c.tls, st)
	}
	return int(sqlite3.Xsqlite3_stmt_status(c.tls, st, sqlite3.SQLITE_STMTSTATUS_REPREPARE, 0))
}

// A statement on a hot path must not be parsed and planned again between runs:
// SQLite does that when a bound value can change the plan (a partial index chosen
// by a state, a join's "col = ?" with the value 0 or 1 since SQLite 3.54), and it
// cost ingest a fifth of the writer's time before the delivery lookup was fixed.
func TestHotStatementsStayPrepared(t *testing.T) {
	testkit.SQLiteOnly(t, "SQLite's prepared statements and their re-preparing")
	c := openC(t, openTest(t, Options{}).Path())

	// Webhooks 1 and 2 alternating, as in switchboard bench, with and without a
	// replay key.
	var deliveries [][]any
	for i := range 20 {
		var key any
		if i%3 != 0 {
			key = bytes.Repeat([]byte{byte(i)}, 32)
		}
		deliveries = append(deliveries, []any{"d" + string(rune('a'+i)), key, int64(1 + i%2)})
	}
	if n := c.reprepares(deliveryLookup, deliveries); n != 0 {
		t.Errorf("the delivery lookup was prepared again %d times in %d runs after the first", n, len(deliveries)-1)
	}

	for _, state := range []string{StatePending, StateClaimed, StateDone, StateFailed} {
		q, args := todoListQuery(TodoFilter{State: state, Queues: []string{"q"}}, false)
		if n := c.reprepares(q, [][]any{args, args, args, args}); n != 0 {
			t.Errorf("list_todos in state %s was prepared again %d times in 3 runs after the first", state, n)
		}
	}

	// The probe itself: the statement the lookup replaced re-prepares here.
	bare := `SELECT w.id, e.id FROM webhooks w LEFT JOIN webhook_events e ON e.webhook_id = w.id
		WHERE w.id = ?`
	var alternating [][]any
	for i := range 6 {
		alternating = append(alternating, []any{int64(1 + i%2)})
	}
	if n := c.reprepares(bare, alternating); n == 0 {
		t.Error("a bare join on ids 1 and 2 was never prepared again: this SQLite plans differently, and the test no longer proves anything")
	}
}
