package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// What a write function runs its statements through: prepared once on the
// writer's connection, inside the open transaction (see writer.go), and the
// writer's own statements there.

// stmt returns a statement prepared once on the writer's connection.
func (t *wtx) stmt(query string) (*sql.Stmt, error) { return t.w.prepared(query) }

func (t *wtx) exec(query string, args ...any) (sql.Result, error) {
	if err := t.sendQueued(); err != nil {
		return nil, err
	}
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	if t.w.s.pg {
		pgText(args)
	}
	return st.ExecContext(t.ctx, args...)
}

func (t *wtx) queryRow(query string, args ...any) scanner {
	if t.queueing && len(t.w.queued) > 0 {
		// Sent with what the write queued, in one round trip (wtxlater.go).
		pgText(args)
		return t.w.sendQueuedWith(t.w.s.q(query), args)
	}
	st, err := t.stmt(query)
	if err != nil {
		// Let Scan report the preparation error.
		return t.w.conn.QueryRowContext(t.ctx, t.w.s.q(query), args...)
	}
	if t.w.s.pg {
		pgText(args)
	}
	return st.QueryRowContext(t.ctx, args...)
}

func (t *wtx) query(query string, args ...any) (*sql.Rows, error) {
	if err := t.sendQueued(); err != nil {
		return nil, err
	}
	st, err := t.stmt(query)
	if err != nil {
		return nil, err
	}
	if t.w.s.pg {
		pgText(args)
	}
	return st.QueryContext(t.ctx, args...)
}

// sendQueued sends what the write queued (wtxlater.go) before a statement
// whose answer it reads.
func (t *wtx) sendQueued() error {
	if !t.queueing {
		return nil
	}
	return t.w.sendQueued()
}

// audit appends an audit row inside the write.
func (t *wtx) audit(actor, action, target, outcome, detail string) error {
	return t.later("store: audit "+action, auditInsert, ms(t.now), actor, action, target, auditOutcome(outcome), detail)
}

// auditOutcome is an audit row's outcome: ok unless said otherwise.
func auditOutcome(outcome string) string {
	if outcome == "" {
		return "ok"
	}
	return outcome
}

const auditInsert = `INSERT INTO audit (at, actor, action, target, outcome, detail) VALUES (?, ?, ?, ?, ?, ?)`

// auditRow appends an audit row inside the write and returns its id.
func (t *wtx) auditRow(actor, action, target, outcome, detail string) (int64, error) {
	id, err := t.insert(auditInsert, ms(t.now), actor, action, target, auditOutcome(outcome), detail)
	if err != nil {
		return 0, fmt.Errorf("store: audit %s: %w", action, err)
	}
	return id, nil
}

// insert runs an INSERT of one row and returns the row's id: SQLite's rowid after
// an Exec (cheaper than RETURNING's result set on the hottest inserts), or on
// PostgreSQL the id the INSERT returns.
func (t *wtx) insert(query string, args ...any) (int64, error) {
	var id int64
	if t.w.s.pg {
		err := t.queryRow(query+" RETURNING id", args...).Scan(&id)
		return id, err
	}
	res, err := t.exec(query, args...)
	if err != nil {
		return 0, err
	}
	if id, err = res.LastInsertId(); err != nil {
		return 0, fmt.Errorf("read the new row's id: %w", err)
	}
	return id, nil
}

// begin is the statement that opens the writer's transaction: on SQLite it takes
// the write lock at once, so a transaction never fails half-way upgrading to it.
func (w *writer) begin() string {
	if w.s.pg {
		return "BEGIN"
	}
	return "BEGIN IMMEDIATE"
}

// requeued announces c, a todo's return to its queue (a release, a retry, an
// expired lease), after the commit, and audits it. The audit row is how another
// process's serve hears of the return (WatchForeign), and its id goes with the
// change so that this process's own serve does not announce it a second time.
func (t *wtx) requeued(c TodoChange, actor, action, detail string) error {
	return t.requeuedAs(c, actor, action, "", detail)
}

// requeuedAs is requeued with the audit row's outcome.
func (t *wtx) requeuedAs(c TodoChange, actor, action, outcome, detail string) error {
	id, err := t.auditRow(actor, action, todoTarget(c.ID), outcome, detail)
	if err != nil {
		return err
	}
	c.auditID = id
	t.changed(c)
	return nil
}

// outcomeDebounce is the outcome of a todo.coalesce audit row whose fold moved
// the todo's debounce: other processes time its wake-up again (announceReturned).
const outcomeDebounce = "debounce"

// changed records a todo change to announce after the commit.
func (t *wtx) changed(c TodoChange) { t.changes = append(t.changes, c) }

var errNoRows = sql.ErrNoRows

func notFound(err error) bool { return errors.Is(err, errNoRows) }

// rollback ends whatever transaction is open; "no transaction is active" is fine.
func (w *writer) rollback() {
	w.ctl("ROLLBACK")
}

// ctl runs a transaction-control statement (BEGIN, SAVEPOINT, RELEASE, COMMIT…),
// prepared once: every request in a batch runs two of them, and parsing them
// each time was a measurable share of the writer's time.
func (w *writer) ctl(query string) (sql.Result, error) {
	st, err := w.prepared(query)
	if err != nil {
		return nil, err
	}
	return st.ExecContext(context.Background())
}

// prepared returns query prepared once on the writer's connection. Only the writer
// goroutine calls it, so the map needs no lock.
func (w *writer) prepared(query string) (*sql.Stmt, error) {
	if st, ok := w.stmts[query]; ok {
		return st, nil
	}
	st, err := w.conn.PrepareContext(context.Background(), w.s.q(query))
	if err != nil {
		return nil, err
	}
	w.stmts[query] = st
	return st, nil
}
