package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"
)

// The writer is the single write path. Callers hand it a function; the writer
// goroutine runs every function that is waiting at the same moment inside one
// transaction, each under its own savepoint, and commits once. A function that fails
// is rolled back to its savepoint and does not fail the others. Each caller is
// answered only after the commit that holds its work is durable, so N concurrent
// writers cost one fsync instead of N. A lone writer runs without a savepoint.
//
// With synchronous=FULL the writer syncs the WAL itself right after COMMIT (see
// walFile): the todo changes a batch made are announced between the commit and the
// sync, and its callers are answered after the sync. What callers hand it, and
// how they wait, is in writereq.go.

type writer struct {
	s     *Store
	reqs  chan *writeReq
	stop  chan struct{}
	wg    sync.WaitGroup
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	lost  bool // PostgreSQL dropped conn and no new one is open yet (reconnect.go)
	// readOnly says a write was refused as read-only (SQLSTATE 25006): the next
	// batch runs on a session opened afresh, at most once a second (reconnect.go).
	readOnly atomic.Bool
	reopened time.Time    // when the writer last did
	pid      atomic.Int64 // PostgreSQL's process serving conn: its notifications are our own
	session  pgSession    // PostgreSQL's session on conn (pgflush.go)

	flusher *pgFlusher            // PostgreSQL: makes the commits durable and answers them (pgflush.go)
	wal     *walFile              // nil when SQLite syncs its own commits (NORMAL)
	syncWAL func() error          // wal.sync; tests replace it
	broken  atomic.Pointer[error] // set when a WAL sync failed; every later write fails

	trouble    atomic.Pointer[WriteTrouble] // a spell of writes failing for the disk's sake
	troubleMu  sync.Mutex                   // orders changes to trouble
	lastCommit atomic.Int64                 // during a spell, when a transaction last committed (unix ns)

	mu     sync.Mutex
	closed bool

	batches  atomic.Int64 // transactions committed or rolled back
	requests atomic.Int64 // write requests answered
	busy     atomic.Int64 // nanoseconds spent running transactions, COMMIT included
	commit   atomic.Int64 // nanoseconds spent committing: COMMIT (WAL writes, autocheckpoint) and the WAL's sync
	piped    atomic.Int64 // batches committed in one round trip (pipeline.go)
	inSets   atomic.Int64 // writes committed in a statement shared with others (pipeline_sets.go)
	reruns   atomic.Int64 // batches run bare that ran again with savepoints (see bare)

	// On PostgreSQL, the running write's statements sent later, the first of
	// them that failed, and the round trips that sent them (wtxlater.go).
	queued     []pgLater
	queuedErr  error
	sends      int
	pgPrepared map[string]bool // statements prepared on conn under their text, for send
	// The write whose last statements wait at the head of queued, how many
	// they are, and, once sent, whether they failed and how (wtxlater.go).
	carry       *writeReq
	carried     int
	carryFailed bool
	carryLost   bool // the round trip failed, not one of its statements
	carryErr    error
}

// WriterStats says how well group commit is batching: Requests/Batches is the mean
// number of writes that shared one fsync. Busy/elapsed near 1 means the writer is the
// bottleneck; Commit/Busy says how much of that is the durable commit itself rather
// than the statements. Both are wall time on the writer goroutine, so they include
// time it waited for a CPU. Pipelined counts the batches PostgreSQL committed in
// one round trip; their statements' answers come back with the COMMIT's, so their
// time counts in Busy and hardly in Commit. On PostgreSQL the flusher makes the
// commits durable (pgflush.go), several batches a flush, off the writer: neither
// Busy nor Commit holds that time.
type WriterStats struct {
	Batches   int64
	Requests  int64
	Busy      time.Duration
	Commit    time.Duration
	Pipelined int64
	InSets    int64 // writes committed in a set-based statement (pipeline_sets.go)
	Reruns    int64 // batches run without savepoints that ran again with them after a write failed
}

// WriterStats reports the writer's counters since Open.
func (s *Store) WriterStats() WriterStats {
	if s.writer == nil {
		return WriterStats{}
	}
	w := s.writer
	return WriterStats{Batches: w.batches.Load(), Requests: w.requests.Load(),
		Busy: time.Duration(w.busy.Load()), Commit: time.Duration(w.commit.Load()), Pipelined: w.piped.Load(),
		InSets: w.inSets.Load(), Reruns: w.reruns.Load()}
}

// wtx is what a write function sees: statements on the writer's connection inside
// the open transaction, the commit's timestamp, and a place to record the todo
// changes that the commit announces.
type wtx struct {
	w       *writer
	ctx     context.Context
	now     time.Time
	changes []TodoChange
	// queueing: on PostgreSQL, later queues statements (wtxlater.go).
	queueing bool
	// credsChanged: the write revoked or edited an endpoint; the credential
	// cache moves on as it commits, before its changes ring (announce).
	credsChanged bool
}

func newWriter(ctx context.Context, s *Store) (*writer, error) {
	conn, err := s.wdb.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: open write connection: %w", err)
	}
	w := &writer{
		s:     s,
		reqs:  make(chan *writeReq, s.opts.MaxBatch),
		stop:  make(chan struct{}),
		conn:  conn,
		stmts: map[string]*sql.Stmt{},
	}
	if s.opts.Synchronous == SyncFull && !s.pg {
		if w.wal, err = openWAL(ctx, conn, s.path); err != nil {
			conn.Close()
			return nil, err
		}
		w.syncWAL = w.wal.sync
		// Only this connection: everything else that writes the file (migrations
		// at Open, the floor, other processes) keeps FULL.
		if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
			w.wal.close()
			conn.Close()
			return nil, fmt.Errorf("store: set up the write connection: %w", err)
		}
	}
	if err := w.noteSession(ctx); err != nil {
		conn.Close()
		return nil, fmt.Errorf("store: set up the write connection: %w", err)
	}
	if s.pg {
		w.flusher = newPGFlusher(s)
	}
	w.wg.Add(1)
	go w.loop()
	return w, nil
}

func (w *writer) close() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	close(w.stop)
	w.mu.Unlock()
	w.wg.Wait()
	if w.flusher != nil {
		w.flusher.close()
	}
	if w.wal != nil {
		w.wal.close()
	}
	for _, st := range w.stmts {
		st.Close()
	}
	w.conn.Close()
}

func (w *writer) loop() {
	defer w.wg.Done()
	batch := make([]*writeReq, 0, w.s.opts.MaxBatch)
	for {
		var first *writeReq
		select {
		case first = <-w.reqs:
		case <-w.stop:
			// Finish what was accepted before close.
			for {
				select {
				case r := <-w.reqs:
					w.run(r.withFollow(nil))

				default:
					return
				}
			}
		}
		batch = first.withFollow(batch[:0])
	drain:
		for len(batch) < w.s.opts.MaxBatch {
			select {
			case r := <-w.reqs:
				batch = r.withFollow(batch)
			default:
				break drain
			}
		}
		w.run(batch)
	}
}

// run executes one batch in one transaction and answers every request in it.
// Exclusive requests run on their own, before or after the transaction.
func (w *writer) run(batch []*writeReq) {
	if err := w.ensureConn(); err != nil {
		for _, r := range batch {
			r.err = err
			w.requests.Add(1)
			close(r.done)
		}
		return
	}
	txn := batch[:0:0]
	for _, r := range batch {
		if r.raw == nil {
			txn = append(txn, r)
			continue
		}
		if r.err = r.ctx.Err(); r.err == nil {
			r.err = w.brokenErr()
		}
		if r.err == nil {
			r.err = r.raw(w.conn)
		}
		// A raw statement may commit too (PRAGMA optimize runs ANALYZE).
		if r.err == nil && w.wal != nil {
			if err := w.syncWAL(); err != nil {
				w.fail(err)
				r.err = err
			}
		}
		w.requests.Add(1)
		close(r.done)
	}
	if len(txn) > 0 {
		w.runTx(txn)
	}
}

func (w *writer) runTx(batch []*writeReq) {
	start := time.Now()
	// Times are stored to the millisecond: a write's answer carries them as a
	// later read of the row will.
	now := w.s.now().Truncate(time.Millisecond)
	// committed says whether the transaction committed: on PostgreSQL its
	// callers are answered once the flusher has the commit on disk (pgflush.go).
	committed := false
	var flushGen uint64 // the flusher's connection before the transaction began
	if w.flusher != nil {
		flushGen = w.flusher.current()
	}
	finish := func(err error) {
		w.busy.Add(int64(time.Since(start)))
		w.batches.Add(1)
		if committed && err == nil && w.flusher != nil {
			w.flusher.after(w.session, flushGen, func(err error) { w.answer(batch, err) })
			return
		}
		w.answer(batch, err)
	}
	if err := w.brokenErr(); err != nil {
		finish(err)
		return
	}
	if w.pipelinable(batch) {
		err := w.pipeline(batch, now)
		if !errors.Is(err, errStatementFailed) {
			if err == nil {
				w.piped.Add(1)
				w.noteCommitted()
				w.announce(batch)
				committed = true
			}
			finish(err)
			return
		}
	}
	if err := w.beginTx(); err != nil {
		finish(err)
		return
	}
	bare := w.bare(batch)
	ran, over, err := w.runEach(batch, now, bare)
	if bare && errors.Is(err, errRunAgain) {
		// A write failed where the others may have written: the batch runs
		// again, each write under its savepoint.
		w.reruns.Add(1)
		for _, r := range batch {
			r.err = nil
		}
		if err := w.beginTx(); err != nil {
			finish(err)
			return
		}
		ran, over, err = w.runEach(batch, now, false)
	}
	if over {
		finish(err)
		return
	}
	if ran == 0 {
		w.rollback()
		finish(nil)
		return
	}
	held := w.s.own.hold(batch)
	commitStart := time.Now()
	if w.s.pg {
		// Other processes' watches hear of the commit (see pgwatch.go): the
		// notification goes with COMMIT, in one round trip.
		err = w.sendTogether(w.notification(batch), pgLater{what: "COMMIT", query: "COMMIT"})
		if err != nil && !mayRunAgain(err) {
			// The round trip failed, not a statement: COMMIT was sent, and the
			// answer that would say whether it ran was lost.
			err = fmt.Errorf("the connection failed after COMMIT was sent, so it may have been committed: %w", errors.Unwrap(err))
		}
	} else {
		_, err = w.ctl("COMMIT")
	}
	if err != nil {
		w.commit.Add(int64(time.Since(commitStart)))
		w.s.own.drop(held)
		w.rollback()
		finish(fmt.Errorf("store: commit: %w", err))
		return
	}
	w.noteCommitted()
	w.announce(batch)
	committed = true
	if w.wal != nil {
		err = w.syncWAL()
	}
	w.commit.Add(int64(time.Since(commitStart)))
	if err != nil {
		w.fail(err)
		finish(fmt.Errorf("%w; the write was committed but may not be on disk", err))
		return
	}
	finish(nil)
}

// answer answers batch's callers, each with its own error or else err. They are
// counted before anyone is answered, so a caller that reads WriterStats after
// its write sees the write in them.
func (w *writer) answer(batch []*writeReq, err error) {
	w.requests.Add(int64(len(batch)))
	for _, r := range batch {
		if err != nil && r.err == nil {
			r.err = err
			r.wtx.changes = nil
		}
		if w.s.pg && pgErrorCode(r.err) == pgReadOnly {
			w.readOnly.Store(true)
		}
	}
	w.noteRefusals(batch)
	for _, r := range batch {
		close(r.done)
	}
}

// bare reports whether batch may run without savepoints on SQLite: each of its
// writes may run again (writeReq.again), so that if one fails the transaction
// is rolled back and the batch runs again with them (errRunAgain). The
// savepoints cost two statements a write, and SQLite copies every page a write
// changes under one into its statement journal.
func (w *writer) bare(batch []*writeReq) bool {
	if w.s.pg || len(batch) < 2 {
		return false
	}
	for _, r := range batch {
		if !r.again {
			return false
		}
	}
	return true
}

// errRunAgain says a batch run bare (see bare) was rolled back because one of
// its writes failed.
var errRunAgain = errors.New("store: a write of a batch without savepoints failed")

// runEach runs each request of batch in the open transaction, under a savepoint
// of its own unless it is alone or bare, and says how many ran. over means the
// transaction was rolled back: err, when set, fails the whole batch, or, bare,
// is errRunAgain.
func (w *writer) runEach(batch []*writeReq, now time.Time, bare bool) (ran int, over bool, err error) {
	single := len(batch) == 1
	w.carry, w.carried, w.carryFailed, w.carryLost, w.queued = nil, 0, false, false, nil
	for _, r := range batch {
		// A caller that gives up is skipped if it has not started, but once its
		// statements run they are not cancelled: SQLite answers an interrupted
		// write by rolling back the whole transaction, which would fail every
		// other request sharing this commit.
		r.wtx = wtx{w: w, ctx: context.WithoutCancel(r.ctx), now: now}
		if w.carry != nil && (r.lead != nil || !(r.again || r.rerun)) {
			if over, err := w.settleCarry(); over || err != nil {
				return ran, true, err
			}
		}
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		if r.lead != nil && r.lead.err != nil {
			r.err = errLeadFailed
			continue
		}
		if w.s.pg {
			if over, err := w.runQueued(r, single); over || err != nil {
				return ran, true, err
			}
			ran++
			continue
		}
		if single || bare {
			r.err = r.fn(&r.wtx)
			if r.err != nil {
				w.rollback()
				if bare {
					return ran, true, errRunAgain
				}
				return ran, true, nil
			}
			ran++
			continue
		}
		if _, err := w.ctl("SAVEPOINT req"); err != nil {
			w.rollback()
			return ran, true, fmt.Errorf("store: savepoint: %w", err)
		}
		if r.err = r.fn(&r.wtx); r.err != nil {
			r.wtx.changes = nil
			// If SQLite already rolled the whole transaction back (it may on
			// SQLITE_FULL or IOERR), the savepoint is gone: fail the whole batch
			// rather than let later requests run outside a transaction.
			if over, err := w.backToSavepoint(r.err); over {
				return ran, true, err
			}
		} else if _, err := w.ctl("RELEASE req"); err != nil {
			w.rollback()
			return ran, true, fmt.Errorf("store: release savepoint: %w", err)
		}
		ran++
	}
	if over, err := w.settleCarry(); over || err != nil {
		return ran, true, err
	}
	return ran, false, nil
}

// announce runs the todo-change hooks for a committed batch. With synchronous=FULL
// this is after COMMIT and before the WAL's sync, so an agent waiting on a doorbell
// hears of a todo while the disk is still flushing it. That is safe because a ring
// is only a wake-up: the queue is the ledger, and whatever an agent does with a rung
// todo (claim_next) is a later write, answered only after a later sync, which
// carries this one too. Readers may see the batch for the same instant; nobody is
// told it is stored (answered) before the sync.
//
// A hook that panics is logged and skipped: the writer serves every caller, and
// its goroutine has no net/http underneath to recover for it.
func (w *writer) announce(batch []*writeReq) {
	defer func() {
		if p := recover(); p != nil {
			w.s.log.Error("store: a todo-change hook panicked; later hooks for this commit were skipped",
				"panic", p, "stack", string(debug.Stack()))
		}
	}()
	for _, r := range batch {
		if r.err == nil && r.wtx.credsChanged {
			// An agent a ring wakes (a revoked one too) is looked up afresh.
			w.s.creds.changed()
			break
		}
	}
	for _, r := range batch {
		if r.err == nil {
			w.s.fire(r.wtx.changes)
		}
	}
}

// fail stops all writing after a failed sync of the WAL. What the kernel did with
// the unsynced pages is unknown (a retried fsync can report success for pages it
// already dropped), so the only safe course is a restart, from which SQLite
// recovers exactly what reached the disk. Ping reports the failure from then on, so
// /readyz fails and the systemd watchdog restarts the service.
func (w *writer) fail(err error) {
	if w.broken.Load() == nil {
		broken := fmt.Errorf("store: writes stopped after a failed sync of the WAL; restart to recover: %w", err)
		w.broken.Store(&broken)
		w.s.log.Error("store: the WAL could not be synced; refusing writes until restart", "err", err)
	}
}

// brokenErr is the error every write gets after a failed sync, or nil.
func (w *writer) brokenErr() error {
	if p := w.broken.Load(); p != nil {
		return *p
	}
	return nil
}

// notification is the commit's notification (pgwatch.go), saying whether the
// batch changed todos, and its ring when it added or returned todos (pgring.go).
func (w *writer) notification(batch []*writeReq) pgLater {
	payload := ""
	for _, r := range batch {
		if r.err == nil && len(r.wtx.changes) > 0 {
			payload = pgTodosChanged
			break
		}
	}
	n := pgLater{what: "notify the commit", query: pgNotify, args: []any{payload}}
	if ring := ringPayload(batch); ring != "" {
		n.query, n.args = pgNotifyRing, append(n.args, ring)
	}
	return n
}
