package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// Pipelining on PostgreSQL. The writer's batch on PostgreSQL costs round trips,
// not fsyncs: BEGIN, a SAVEPOINT and a RELEASE per request, the request's own
// statements, the notification, COMMIT, each waited for in turn. The hottest
// writes (claim_next on one queue, complete, heartbeat, fail) are one statement
// each there (leases_pg.go), with their checks in the WHERE clause and their audit
// row in a CTE, so a batch made only of such writes is sent whole, BEGIN to
// COMMIT, through pgx's batch (one pipeline, one round trip) with no savepoints:
// a write whose check fails changes nothing and answers its error, and the others
// commit. If the server refuses a statement (a deadlock with another process),
// the transaction is rolled back and the batch runs again the usual way, each
// request under its own savepoint: that is the batch's one retry. A connection
// lost once the batch was sent fails the batch as a whole (its COMMIT may have
// run: see mayRunAgain); a row a write cannot scan answers that write alone (the
// batch was committed: see readOne). Every answer still waits for the COMMIT's
// result.

// pgOne is a write that is one statement on PostgreSQL, and what to make of its
// row. It must not add a todo nor return one to its queue: the watch of this
// process's own changes learns of those before the COMMIT is sent (see hold).
// A key's next todo, freed by a complete or a fail, is held as soon as the
// statements' answers are read, before the COMMIT's (see pipeline).
type pgOne struct {
	query string
	args  func(now time.Time) []any // the statement's arguments at the batch's time
	// fnArgs, if set, are the arguments when the write runs as any other write
	// (under a savepoint, after the write it follows has been checked in Go):
	// a follow-up's claim drops its own check there (see pgClaimAfter).
	fnArgs func(now time.Time) []any
	// read takes the statement's row (or its sql.ErrNoRows) and records the
	// outcome: the caller's result, its error, the changes to announce.
	read func(w *wtx, row scanner) error
	// quiet: it changes no todo's state or queue (a heartbeat), so it alone does
	// not make the commit's notification say todos changed (see notify).
	quiet bool
	// ack is the todo a complete or a fail acks (0 for other writes): a batch
	// with a follow-up where two writes ack one todo is not pipelined (see
	// ackedTwice).
	ack int64
	// set, if not nil, lets a batch send this write and others of its kind as
	// one statement (pipeline_sets.go).
	set *pgSetWrite
}

// writeOne runs one as a write: pipelined with its batch when the whole batch is
// made of such writes, and otherwise as any other write, through the same read.
func (s *Store) writeOne(ctx context.Context, one *pgOne) error {
	return s.submit(ctx, s.oneReq(ctx, one))
}

// oneReq is one's write request, for writeOne or submitThen.
func (s *Store) oneReq(ctx context.Context, one *pgOne) *writeReq {
	fn := func(w *wtx) error {
		args := one.args
		if one.fnArgs != nil {
			args = one.fnArgs
		}
		err := one.read(w, w.queryRow(one.query, args(w.now)...))
		if code := pgErrorCode(err); code == "40P01" || code == "40001" {
			// Said plainly. A batch sent whole has met it once already: this is
			// its one retry.
			return fmt.Errorf("store: the write met another process's write in a deadlock and changed nothing; try it again: %w", err)
		}
		return err
	}
	return &writeReq{ctx: ctx, fn: fn, one: one, done: make(chan struct{})}
}

// pipelinable reports whether batch can be sent whole.
func (w *writer) pipelinable(batch []*writeReq) bool {
	if !w.s.pg {
		return false
	}
	for _, r := range batch {
		if r.one == nil {
			return false
		}
	}
	return !ackedTwice(batch)
}

// errStatementFailed says a pipelined batch was rolled back because one of its
// statements failed: the writer runs it again one request at a time.
var errStatementFailed = errors.New("store: a statement of the pipelined batch failed")

// pipeline runs batch in one round trip: BEGIN, each request's statement, the
// notification and COMMIT. It returns errStatementFailed, with nothing
// committed, when a statement failed; any other error is the commit's.
func (w *writer) pipeline(batch []*writeReq, now time.Time) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(pgPipelineLock)
	live := batch[:0:0]
	for _, r := range batch {
		r.wtx = wtx{w: w, ctx: context.WithoutCancel(r.ctx), now: now}
		if r.err = r.ctx.Err(); r.err != nil {
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return nil
	}
	units := pgUnits(live)
	inSets := 0
	for _, unit := range units {
		if len(unit) > 1 {
			queueSet(b, w.s, unit, ms(now))
			inSets += len(unit)
			continue
		}
		args := unit[0].one.args(now)
		pgText(args)
		b.Queue(w.s.q(unit[0].one.query), args...)
	}
	// The payload is decided before the answers are read: a write that may change
	// todos counts as changing them (a refused one only costs a redraw elsewhere).
	payload := ""
	if slices.ContainsFunc(live, func(r *writeReq) bool { return !r.one.quiet }) {
		payload = pgTodosChanged
	}
	b.Queue(pgNotify, payload)
	b.Queue("COMMIT")
	var committing time.Time
	err := w.conn.Raw(func(dc any) error {
		conn := dc.(*stdlib.Conn).Conn()
		ctx := context.Background()
		br := conn.SendBatch(ctx, b)
		err := w.readPipeline(br, units)
		committing = time.Now()
		var held heldIDs
		if err == nil {
			// Before the COMMIT's answer is read, as soon as the statements' are:
			// the audit row of a key freed here (keyFreed) is this process's own.
			held = w.s.own.hold(live)
			var tag string
			t, cerr := br.Exec()
			if tag = t.String(); cerr == nil && tag != "COMMIT" {
				cerr = fmt.Errorf("the server answered %q", tag)
			}
			if cerr != nil {
				err = fmt.Errorf("store: commit: %w", cerr)
			}
		}
		if cerr := br.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("store: commit: %w", cerr)
		}
		if err != nil {
			w.s.own.drop(held)
			conn.Exec(ctx, "ROLLBACK")
		}
		return err
	})
	if !committing.IsZero() {
		w.commit.Add(int64(time.Since(committing)))
	}
	if err == nil {
		w.inSets.Add(int64(inSets))
	}
	if errors.Is(err, errStatementFailed) && !mayRunAgain(err) {
		// The COMMIT was sent with the batch: the server may have run it.
		err = fmt.Errorf("store: commit: the connection failed after the batch was sent, so it may have been committed: %v", err)
	}
	if errors.Is(err, errStatementFailed) {
		for _, r := range live {
			r.err = nil
		}
	}
	return err
}

// mayRunAgain reports whether a batch that failed with err (errStatementFailed)
// surely committed nothing, so that it may run again: the server refused one of
// its statements (and so rolls the transaction back at its COMMIT), or nothing of
// it reached the server. A connection cut while the answers were read leaves the
// batch's outcome unknown: running it again could run each write twice.
func mayRunAgain(err error) bool {
	var refused *pgconn.PgError
	return errors.As(err, &refused) || pgconn.SafeToRetry(err)
}

// readPipeline reads BEGIN's, the writer lock's, each unit's and the
// notification's results.
func (w *writer) readPipeline(br pgx.BatchResults, units [][]*writeReq) error {
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("%w: begin: %w", errStatementFailed, err)
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("%w: take the writer lock: %w", errStatementFailed, err)
	}
	for _, unit := range units {
		if len(unit) > 1 {
			if err := readSet(br, unit); err != nil {
				return err
			}
			continue
		}
		r := unit[0]
		row, err := readRow(br)
		if err != nil {
			return fmt.Errorf("%w: %w", errStatementFailed, err)
		}
		readOne(r, row)
	}
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("%w: notify the commit: %w", errStatementFailed, err)
	}
	return nil
}

// readRow reads a statement's first row, if any, as a pgRawRow. It is read
// whole before it is scanned: pgx fails the whole batch, and so the reading of
// its COMMIT's result, when a row it is scanning cannot be scanned.
func readRow(br pgx.BatchResults) (scanner, error) {
	rows, err := br.Query()
	if err != nil {
		rows.Close()
		return nil, err
	}
	var row scanner = errRow{sql.ErrNoRows} // its statement returned no row for it
	if rows.Next() {
		row = rawRow(rows, slices.Clone(rows.FieldDescriptions()), rows.RawValues())
	}
	rows.Close()
	return row, rows.Err()
}

// readOne answers r from its row. A row that its read could not scan is no
// failed statement: the statement ran, and the batch's COMMIT, sent with it,
// runs as well; running the batch again would run each of its writes twice.
func readOne(r *writeReq, row scanner) {
	r.err = r.one.read(&r.wtx, row)
	if raw, ok := row.(*pgRawRow); ok && raw.err != nil && !notFound(raw.err) {
		r.err = fmt.Errorf("store: the write was committed, but its row could not be read: %w", raw.err)
	}
}
