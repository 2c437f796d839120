package store

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// A SQLite file does not go away; a PostgreSQL server does (a restart, a
// failover, a network cut). The writer holds one connection for its whole life,
// so when the server drops it the writer opens another before its next batch,
// with nothing prepared on it yet. While the server is away every write fails at
// once with ErrUnreachable (the edges answer unavailable, or 503 to a delivery),
// and the first batch after it is back commits through the same Store. A batch
// cut off mid-way fails as a whole: its callers were not answered, and a COMMIT
// whose answer was lost is reported failed (a delivery sent again is recognised
// by its delivery id).

// redialTimeout bounds one attempt to reach the server again, so that writes
// fail in bounded time while it is away.
const redialTimeout = 5 * time.Second

// connLost reports whether the writer's connection to PostgreSQL has ended
// (pgx closes it on a lost socket or the server's FATAL goodbye).
func (w *writer) connLost() bool {
	if !w.s.pg {
		return false
	}
	lost := false
	err := w.conn.Raw(func(dc any) error {
		if c, ok := dc.(*stdlib.Conn); ok && c.Conn().IsClosed() {
			lost = true
			return driver.ErrBadConn // database/sql drops the connection
		}
		return nil
	})
	return lost || err != nil
}

// ensureConn replaces a lost connection before a batch runs on it, and a
// session whose writes were refused as read-only: a session keeps the
// default_transaction_read_only it started with (ALTER DATABASE or ALTER ROLE
// … SET, for maintenance) after the database is made writable again, and a
// replica's session stays on the replica, while a new one may reach the primary.
func (w *writer) ensureConn() error {
	if w.readOnly.Load() && time.Since(w.reopened) >= time.Second {
		w.readOnly.Store(false)
		w.reopened = time.Now()
		if err := w.reopen(); err != nil {
			return w.s.unreachable(err)
		}
		return nil
	}
	if !w.connLost() {
		return nil
	}
	return w.redial()
}

// redial closes the lost connection and its prepared statements and opens a new
// one; until that succeeds w.conn stays closed, so the next batch tries again.
func (w *writer) redial() error {
	if !w.lost {
		w.lost = true
		w.s.log.Warn("store: lost the connection to PostgreSQL; reconnecting before each write")
	}
	if err := w.reopen(); err != nil {
		return w.s.unreachable(err)
	}
	w.lost = false
	w.s.log.Info("store: connected to PostgreSQL again")
	return nil
}

// reopen closes the writer's connection and its prepared statements and opens
// a new one; until that succeeds w.conn stays closed (connLost), so the next
// batch tries again.
func (w *writer) reopen() error {
	for q, st := range w.stmts {
		st.Close()
		delete(w.stmts, q)
	}
	w.pgPrepared = nil
	// ErrBadConn has database/sql close the connection, not keep it for reuse.
	w.conn.Raw(func(any) error { return driver.ErrBadConn })
	w.conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), redialTimeout)
	defer cancel()
	conn, err := w.s.wdb.Conn(ctx)
	if err == nil {
		w.conn = conn
		err = w.noteSession(ctx)
	}
	if err != nil {
		return err
	}
	w.s.dropIdleReads()
	return nil
}

// noteSession records the server session that serves the writer (notifications
// its process sends are this process's own: see listen; the flusher checks the
// session is still there), and leaves the flusher to make the writer's commits
// durable (pgflush.go).
func (w *writer) noteSession(ctx context.Context) error {
	if !w.s.pg {
		return nil
	}
	var sess pgSession
	if err := w.conn.QueryRowContext(ctx, pgSessionQuery).Scan(&sess.pid, &sess.started); err != nil {
		return err
	}
	if _, err := w.conn.ExecContext(ctx, `SET synchronous_commit = off`); err != nil {
		return err
	}
	w.pid.Store(sess.pid)
	w.session = sess
	return nil
}

// unreachable is err, a failure to reach the server, as one line that names it
// (never its password).
func (s *Store) unreachable(err error) error {
	return connectError(s.pgcfg, err)
}

// connectFailed reports whether err is a failure to open a connection to the
// server (refused, timed out, the server starting or stopping), not a query's.
func connectFailed(err error) bool {
	var ce *pgconn.ConnectError
	return errors.As(err, &ce)
}

// beginTx opens the writer's transaction. A connection found dead only at BEGIN
// (the server restarted while it sat idle) is replaced and BEGIN tried once more:
// nothing of the batch has run yet. A transaction that BEGIN opened and the
// writer lock then failed in (refused past a lock_timeout or statement_timeout
// the role or the URL sets, while another process held it) is rolled back:
// left open, it would fail every later batch on the connection.
func (w *writer) beginTx() error {
	err := w.beginStatements()
	if err != nil && w.connLost() {
		if err = w.redial(); err != nil {
			return err // says which server could not be reached
		}
		err = w.beginStatements()
	}
	if err != nil {
		w.rollback()
		return fmt.Errorf("store: begin write: %w", err)
	}
	return nil
}

// beginStatements opens the transaction: on PostgreSQL BEGIN and the writer
// lock, in one round trip.
func (w *writer) beginStatements() error {
	if !w.s.pg {
		_, err := w.ctl(w.begin())
		return err
	}
	return w.sendTogether(pgLater{what: "BEGIN", query: w.begin()}, pgLater{what: "the writer lock", query: pgWriterLock})
}

// pgWriterLock is the first statement of every write transaction on PostgreSQL:
// the writers of all processes on one database schema take turns, as SQLite's
// one writer does. Without it, two processes' batches update the same rows
// (queue_counts above all, kept by triggers) in different orders and deadlock;
// with it, a fleet adds availability rather than write throughput
// (docs/fleet-state.md). The key is per schema, beside eventmark.go's
// (1398227540).
const pgWriterLock = `SELECT ` + pgWriterLockCall + `, ` + pgWriterPlanning

// pgWriterLockCall takes the writers' lock of the schema (pgWriterLock) until
// the transaction ends.
const pgWriterLockCall = `pg_advisory_xact_lock(1398227541, hashtext(current_schema()))`

// pgWriterPlanning plans a write transaction's statements, for that transaction
// only, without sequential scans where an index serves. The writer's statements
// each find their few rows by an index (on SQLite they name it, INDEXED BY), so
// a scan of a table is never the way; but PostgreSQL keeps a prepared
// statement's plan for the connection's life, and a plan made while todos was
// nearly empty (a new install) scanned the whole table once it was full, on each
// heartbeat, release, fail or complete, until autovacuum analysed it
// (TestAcksPlannedOnAnEmptyTableFindTheirTodosById). A statement no index
// serves still scans (and is not JIT-compiled for its cost: the writer's
// connection has jit off, openPostgres). PostgreSQL's plan cache does not
// track settings, so a plan made in one write transaction serves the next:
// every write transaction has this one.
const pgWriterPlanning = `set_config('enable_seqscan', 'off', true)`

// pgPipelineLock is pgWriterLock for a pipelined batch (pipeline.go), which
// also sets how the batch's statements are planned (pgPipelinePlanning).
const pgPipelineLock = pgWriterLock + `, ` + pgPipelinePlanning

// pgPipelinePlanning has a pipelined batch's statements, for its transaction
// only, run by their generic plans (and, as every write, without sequential
// scans). Those are the writes of pgOne, each a fixed shape that finds its few
// todos by an index (by id, by todos_reserved, or its heads by
// todos_lock_heads): a plan made for the arguments gains nothing. Left to
// choose, PostgreSQL planned the claim of several (pgClaimSet) anew on each run
// once its queue was deep, for longer than it took to run it: 0.86 ms a batch
// at 40,000 pending.
const pgPipelinePlanning = `set_config('plan_cache_mode', 'force_generic_plan', true)`

// dropIdleReads closes the read pool's idle connections: after the server came
// back, each of them was cut and would fail its next query once.
func (s *Store) dropIdleReads() {
	s.rdb.SetMaxIdleConns(0)
	s.rdb.SetMaxIdleConns(s.opts.ReadConns)
}
