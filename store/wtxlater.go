package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Statements sent later. On PostgreSQL each statement of a write was a round
// trip of its own: sent, run, answered, and only then the next one sent, each a
// wait for the server and a switch between two processes. Most of a write's
// statements give nothing it reads (its savepoint and its release, a lock, an
// INSERT of a row whose id it knows, an audit row): those are queued and sent
// with the write's next statement, or at its end, in one round trip (pgx's
// batch). A delivery, which took seven round trips, now takes three.
//
// The first queued statement that fails fails the write as if it had failed
// where it was queued: its error, wrapped as the write would have wrapped it,
// is the write's, whatever the write did after it (every later statement of the
// transaction fails with "current transaction is aborted"). On SQLite, and
// wherever a write's statements are not run one by one (a pipelined batch's
// reads), later runs the statement at once.

// pgLater is a queued statement: its query (placeholders already $n), its
// arguments, and what failed if it fails.
type pgLater struct {
	what  string
	query string
	args  []any
}

// later runs query, whose answer the write does not read: at once, or on
// PostgreSQL queued (see above). Its error, now or when it is sent, is wrapped
// with what.
func (t *wtx) later(what, query string, args ...any) error {
	if !t.queueing {
		if _, err := t.exec(query, args...); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	pgText(args)
	t.w.queue(what, query, args...)
	return nil
}

// queue queues query for the next sendQueued.
func (w *writer) queue(what, query string, args ...any) {
	w.queued = append(w.queued, pgLater{what: what, query: w.s.q(query), args: args})
}

// sendQueuedWith sends the queued statements and then query, in one round
// trip, and returns query's first row, read as database/sql reads one
// (pgRawRow). A queued statement that failed is the row's error.
func (w *writer) sendQueuedWith(query string, args []any) scanner {
	row, err := w.send(&pgLater{query: query, args: args})
	if err != nil {
		return errRow{err}
	}
	return row
}

// errRow is a row that was not read: Scan returns why.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// sendQueued sends the queued statements in one round trip and empties the
// queue. It returns the first failure.
func (w *writer) sendQueued() error {
	if len(w.queued) == 0 {
		return nil
	}
	_, err := w.send(nil)
	return err
}

// send sends the queued statements, and then final if not nil, and empties the
// queue. It returns final's first row, or the first failure, which it keeps as
// the cause of the running write's failure (queuedErr) when none is kept yet;
// final's own failure is returned unwrapped, as database/sql would.
//
// The statements go as one batch once each is prepared on the connection
// (under its own text, which pgx's batch then runs by name). pgx would prepare
// the others in a step of their own before the batch's first statement: one
// that PostgreSQL refuses to prepare (a table an older schema lacks) would abort
// the transaction before the write's savepoint was taken, and with it every
// other write of the batch. So a statement not yet prepared is prepared where
// it stands, after those before it have run; that happens once a connection.
func (w *writer) send(final *pgLater) (scanner, error) {
	all := w.queued
	w.queued = nil
	w.sends++
	if final != nil {
		all = append(all, *final)
	}
	var row scanner
	var first error
	finalFailed := false // first is final's own failure
	fail := func(i int, err error) {
		if first != nil {
			return
		}
		if l := all[i]; final != nil && i == len(all)-1 {
			first, finalFailed = err, true
		} else {
			first = fmt.Errorf("%s: %w", l.what, err)
		}
	}
	err := w.conn.Raw(func(dc any) error {
		conn := dc.(*stdlib.Conn).Conn()
		ctx := context.Background()
		for at := 0; at < len(all) && first == nil; {
			n := at
			for n < len(all) && w.pgPrepared[all[n].query] {
				n++
			}
			if n == at {
				if _, err := conn.Prepare(ctx, all[at].query, all[at].query); err != nil {
					fail(at, err)
					break
				}
				if w.pgPrepared == nil {
					w.pgPrepared = map[string]bool{}
				}
				w.pgPrepared[all[at].query] = true
				continue
			}
			b := &pgx.Batch{}
			for _, l := range all[at:n] {
				b.Queue(l.query, l.args...)
			}
			br := conn.SendBatch(ctx, b)
			for i := at; i < n; i++ {
				if final != nil && i == len(all)-1 {
					r, err := readRow(br)
					if err != nil {
						fail(i, err)
					}
					row = r
					continue
				}
				if _, err := br.Exec(); err != nil {
					fail(i, err)
				}
			}
			if err := br.Close(); err != nil && first == nil {
				return err
			}
			at = n
		}
		return nil
	})
	if first == nil && err != nil {
		first = fmt.Errorf("store: send the write's statements: %w", err)
	}
	if first != nil {
		if w.queuedErr == nil && !finalFailed {
			w.queuedErr = first
		}
		return nil, first
	}
	return row, nil
}

// runQueued runs r on PostgreSQL, its statements sent later where they can be,
// under a savepoint of its own unless it is alone (single). over means the
// transaction was rolled back: err, when set, fails the whole batch.
func (w *writer) runQueued(r *writeReq, single bool) (over bool, err error) {
	w.queued, w.queuedErr = nil, nil
	r.wtx.queueing = true
	if !single {
		w.queue("store: savepoint", "SAVEPOINT req")
	}
	sends := w.sends
	r.err = r.fn(&r.wtx)
	if w.queuedErr != nil {
		// The first failure: what the write met after it follows from it.
		r.err = w.queuedErr
	}
	switch {
	case r.err == nil:
		if !single {
			w.queue("store: release savepoint", "RELEASE req")
		}
		r.err = w.sendQueued()
	case w.sends == sends:
		// Nothing of the write reached the server, not even its savepoint.
		w.queued = nil
		r.wtx.changes = nil
		if single {
			w.rollback()
			return true, nil
		}
		return false, nil
	default:
		// What it queued after its last round trip is dropped; the savepoint's
		// rollback undoes the rest.
		w.queued = nil
	}
	if r.err == nil {
		return false, nil
	}
	r.wtx.changes = nil
	if single {
		w.rollback()
		return true, nil
	}
	if _, err := w.ctl("ROLLBACK TO req"); err != nil {
		w.rollback()
		return true, fmt.Errorf("store: write aborted after %v: %w", r.err, err)
	}
	if _, err := w.ctl("RELEASE req"); err != nil {
		w.rollback()
		return true, fmt.Errorf("store: release savepoint: %w", err)
	}
	return false, nil
}
