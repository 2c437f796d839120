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
// batch); the end of one write can go with the next write's first round trip
// (Carrying, below). A delivery, which took seven round trips, takes one in a
// batch of deliveries.
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

// sendTogether sends stmts, the writer's own statements outside any write
// (BEGIN with the writer lock, the notification with COMMIT), in one round trip,
// and returns the first failure.
func (w *writer) sendTogether(stmts ...pgLater) error {
	w.queued, w.carry, w.carried = stmts, nil, 0
	_, err := w.send(nil)
	w.queuedErr = nil
	return err
}

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
	firstAt := 0
	finalFailed := false // first is final's own failure
	fail := func(i int, err error) {
		if first != nil {
			return
		}
		firstAt = i
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
	lost := false // the round trip failed, not a statement of it
	if first == nil && err != nil {
		first, lost = fmt.Errorf("store: send the write's statements: %w", err), true
	}
	if c := w.carry; c != nil {
		// The carried statements came first: they decide the carried write.
		// When the round trip itself failed, nobody knows which of them ran:
		// the whole transaction goes (dropCarry).
		carried := w.carried
		w.carry, w.carried = nil, 0
		if first != nil && (lost || firstAt < carried) {
			c.err, c.wtx.changes = first, nil
			w.carryErr, w.carryFailed, w.carryLost = first, true, lost
			return nil, first
		}
	}
	if first != nil {
		if w.queuedErr == nil && !finalFailed {
			w.queuedErr = first
		}
		return nil, first
	}
	return row, nil
}

// Carrying. A write that succeeds in Go leaves its last statements (and its
// savepoint's release) queued for the next write, whose first round trip then
// carries them: a delivery takes one round trip rather than two. Until then the
// write's outcome is open. If one of its statements fails, it fails with that
// error, the transaction goes back to its savepoint, and the next write, whose
// statements in that round trip failed with it, runs again from its start. So
// only a write that may run again (writeReq.again or rerun) takes a carry on,
// and one that follows another (lead) waits for its lead's outcome; before any
// other write, and at the batch's end, the carry is sent on its own.

// runQueued runs r on PostgreSQL, its statements sent later where they can be,
// under a savepoint of its own unless it is alone (single). over means the
// transaction was rolled back: err, when set, fails the whole batch.
func (w *writer) runQueued(r *writeReq, single bool) (over bool, err error) {
	start := r.wtx
	for {
		r.wtx = start
		r.wtx.queueing = true
		w.queuedErr = nil
		if w.carry == nil {
			w.queued = nil
		}
		if !single {
			w.queue("store: savepoint", "SAVEPOINT req")
		}
		sends := w.sends
		r.err = r.fn(&r.wtx)
		if w.queuedErr != nil {
			// The first failure: what the write met after it follows from it.
			r.err = w.queuedErr
		}
		sent := w.sends != sends // some of r's statements reached the server
		switch {
		case w.carryFailed:
		case r.err == nil && !single && w.carry == nil:
			w.queue("store: release savepoint", "RELEASE req")
			w.carry, w.carried = r, len(w.queued)
			return false, nil
		case r.err == nil:
			if !single {
				w.queue("store: release savepoint", "RELEASE req")
			}
			r.err = w.sendQueued()
			sent = true
		case !sent:
			// Nothing of r reached the server: its statements are dropped, a
			// carry still goes.
			w.queued = w.queued[:w.carried]
			w.sendQueued()
		default:
			// What it queued after its last round trip is dropped; the savepoint's
			// rollback undoes the rest.
			w.queued = nil
		}
		if w.carryFailed {
			if over, err := w.dropCarry(); over || err != nil {
				r.err = err // the batch's failure, not the carried write's
				return over, err
			}
			if sent {
				continue
			}
		}
		if r.err == nil {
			return false, nil
		}
		r.wtx.changes = nil
		if single {
			w.rollback()
			return true, nil
		}
		if !sent {
			return false, nil
		}
		return w.backToSavepoint(r.err)
	}
}

// settleCarry sends the carried statements on their own (see Carrying).
func (w *writer) settleCarry() (over bool, err error) {
	if w.carry == nil {
		return false, nil
	}
	w.queued = w.queued[:w.carried]
	w.sendQueued()
	if !w.carryFailed {
		return false, nil
	}
	return w.dropCarry()
}

// dropCarry takes the transaction back to the savepoint of the carried write,
// which failed (send answered it).
func (w *writer) dropCarry() (over bool, err error) {
	w.carryFailed = false
	w.queued = nil
	if w.carryLost {
		w.carryLost = false
		w.rollback()
		return true, fmt.Errorf("store: write aborted: %w", w.carryErr)
	}
	return w.backToSavepoint(w.carryErr)
}

// backToSavepoint rolls back to the savepoint of the write that failed with
// cause and releases it. over, when that fails: the whole transaction is rolled
// back and err fails the batch.
func (w *writer) backToSavepoint(cause error) (over bool, err error) {
	if _, err := w.ctl("ROLLBACK TO req"); err != nil {
		w.rollback()
		return true, fmt.Errorf("store: write aborted after %v: %w", cause, err)
	}
	if _, err := w.ctl("RELEASE req"); err != nil {
		w.rollback()
		return true, fmt.Errorf("store: release savepoint: %w", err)
	}
	return false, nil
}
