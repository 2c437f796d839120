package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
)

// On PostgreSQL the writer does not wait for its commits to reach the disk: its
// session commits with synchronous_commit off, and it goes on to the next batch
// while the flusher, on a connection of its own, commits a transaction that
// writes to the log, at the server's synchronous_commit. PostgreSQL writes its
// log in order, so that commit on disk means every commit before it is too;
// then the flusher answers the callers of every batch committed before it
// began. A batch's statements thus run while the previous batch's commit is
// being flushed, and nobody is told a write is stored before it is on disk. As
// on SQLite (see announce), other readers may see a batch for the instant
// before that: what they do with it is a later write, flushed after it.
//
// A crash of any server process makes PostgreSQL end every session and drop
// what its log had not written out, then carry on (restart_after_crash): a
// flush after that proves nothing about a commit made before it. So the flush
// also checks that the writer's session that committed each batch is still
// there: a crash would have ended it. If the flush fails, or that session is
// gone, the batch is answered with an error, as when a COMMIT's answer is lost:
// the write may or may not be there. A flush whose connection was lost is tried
// once more on a new one.
//
// The flusher's own session proves as much, and costs nothing to ask: a crash
// ends it too. So the writer's session is looked up in pg_stat_activity (0.6 ms
// of the server's CPU) only once for each flusher's connection, which shows
// that both are sessions of one server; after that, a batch whose transaction
// began while that connection was already there is confirmed by a flush on it
// alone. A batch older than the connection (the first flushes after it
// reconnected) is still asked after.

// pgFlusher makes the writer's commits durable and answers their callers.
type pgFlusher struct {
	s    *Store
	conn *pgx.Conn // nil until the first flush, and after one failed

	// gen names the connection: it counts connections made, and is 0 while
	// there is none. The writer reads it before a batch (current).
	gen   atomic.Uint64
	conns uint64
	// seen holds the writer's sessions that a flush on this connection found
	// there (on its server).
	seen []pgSession

	mu      sync.Mutex
	flushOn func(ctx context.Context, conn *pgx.Conn, sessions []pgSession) (alive []pgSession, err error) // pgFlush; tests replace it
	waiting []flushWait                                                                                    // batches committed since the flush under way began
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// pgSession names a server session: its process id and when it started (unix
// µs), which a new session with a reused pid does not share.
type pgSession struct{ pid, started int64 }

// pgSessionQuery reads the connection's own session.
const pgSessionQuery = `SELECT pid, ` + pgSessionStarted + ` FROM pg_stat_activity WHERE pid = pg_backend_pid()`

// pgSessionStarted is a pg_stat_activity row's session start, as pgSession has it.
const pgSessionStarted = `(extract(epoch FROM backend_start) * 1e6)::bigint`

// flushWait is a committed batch's answer, the writer's session that
// committed it, and the flusher's connection (gen) that was there before its
// transaction began, or 0.
type flushWait struct {
	session pgSession
	gen     uint64
	answer  func(error)
}

func newPGFlusher(s *Store) *pgFlusher {
	f := &pgFlusher{s: s, flushOn: pgFlush,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go f.loop()
	return f
}

// current names the flusher's connection now (0: none), for a batch about to
// begin to pass to after.
func (f *pgFlusher) current() uint64 { return f.gen.Load() }

// after has answer called once the commit session just made is on disk, or
// with the error that left that unknown; gen is what current said before the
// transaction began.
func (f *pgFlusher) after(session pgSession, gen uint64, answer func(error)) {
	f.mu.Lock()
	f.waiting = append(f.waiting, flushWait{session, gen, answer})
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

func (f *pgFlusher) loop() {
	defer close(f.done)
	for {
		select {
		case <-f.kick:
		case <-f.stop:
			f.flushWaiting() // the writer has stopped: nothing commits after this
			f.disconnect()
			return
		}
		f.flushWaiting()
	}
}

// flushWaiting flushes once for every batch waiting, and answers them.
func (f *pgFlusher) flushWaiting() {
	f.mu.Lock()
	waiting, flushOn := f.waiting, f.flushOn
	f.waiting = nil
	f.mu.Unlock()
	if len(waiting) == 0 {
		return
	}
	had := f.conn != nil
	gen, alive, err := f.flush(flushOn, waiting)
	if err != nil && had {
		// The connection was lost since the last flush: once more on a new one.
		gen, alive, err = f.flush(flushOn, waiting)
	}
	for _, w := range waiting {
		switch {
		case err != nil:
			w.answer(err)
		case !f.proven(w, gen) && !slices.Contains(alive, w.session):
			w.answer(errors.New("store: commit: the session that made it ended before it was known to be on disk (the server may have restarted), so it may not be there"))
		default:
			w.answer(nil)
		}
	}
}

// flush connects if need be and runs the flush, asking after the writer's
// sessions it has not seen, and those of batches older than the connection; it returns the
// connection's gen and which of those sessions are still there. A failure
// closes the connection.
func (f *pgFlusher) flush(flushOn func(context.Context, *pgx.Conn, []pgSession) ([]pgSession, error), waiting []flushWait) (uint64, []pgSession, error) {
	if f.conn == nil {
		ctx, cancel := context.WithTimeout(context.Background(), redialTimeout)
		conn, err := pgx.ConnectConfig(ctx, f.s.pgcfg.Copy())
		cancel()
		if err != nil {
			return 0, nil, fmt.Errorf("store: commit: make it durable: %w", connectError(f.s.pgcfg, err))
		}
		f.conn = conn
		f.conns++
		f.gen.Store(f.conns)
		f.seen = nil
	}
	gen := f.gen.Load()
	var sessions []pgSession
	for _, w := range waiting {
		if !f.proven(w, gen) && !slices.Contains(sessions, w.session) {
			sessions = append(sessions, w.session)
		}
	}
	// No deadline, as for the writer's COMMIT: a slow disk or a lagging
	// synchronous standby makes the callers wait, not fail.
	alive, err := flushOn(context.Background(), f.conn, sessions)
	if err != nil {
		f.disconnect()
		return 0, nil, fmt.Errorf("store: commit: the server may not have it on disk: %w", err)
	}
	for _, a := range alive {
		if !slices.Contains(f.seen, a) {
			// The writer's older sessions, from before it reconnected, commit
			// nothing more: a few are kept.
			f.seen = append(f.seen[max(len(f.seen)-3, 0):], a)
		}
	}
	return gen, alive, nil
}

// proven reports whether a flush on the connection gen, if it succeeds, proves
// w's batch durable by itself: the connection was there before the batch's
// transaction began and has seen its writer's session on its server.
func (f *pgFlusher) proven(w flushWait, gen uint64) bool {
	return w.gen == gen && slices.Contains(f.seen, w.session)
}

// pgFlush commits a transaction that writes a record to the log (a logical
// decoding message, which needs no table and no privilege), so that its commit
// is flushed (and, with synchronous standbys, replicated) before the server
// answers, at the server's synchronous_commit; every commit written before it
// is then durable too. A transaction that only took an id would commit without
// waiting. In the same transaction it reads which of sessions are still there:
// a crash after that would fail the flush. With no sessions to ask after, it
// only writes the record.
func pgFlush(ctx context.Context, conn *pgx.Conn, sessions []pgSession) ([]pgSession, error) {
	if len(sessions) == 0 {
		// With an argument, pgx sends it as a prepared statement, which the
		// server does not parse and plan again each time.
		_, err := conn.Exec(ctx, `SELECT pg_logical_emit_message(true, 'switchboard', $1)`, "")
		return nil, err
	}
	pids, started := make([]int64, len(sessions)), make([]int64, len(sessions))
	for i, s := range sessions {
		pids[i], started[i] = s.pid, s.started
	}
	var alivePIDs, aliveStarted []int64
	err := conn.QueryRow(ctx, `SELECT pg_logical_emit_message(true, 'switchboard', '') IS NOT NULL,
		coalesce(array_agg(w.pid), '{}'), coalesce(array_agg(w.started), '{}')
		FROM unnest($1::bigint[], $2::bigint[]) AS w(pid, started)
		JOIN pg_stat_activity ON pg_stat_activity.pid = w.pid AND `+pgSessionStarted+` = w.started`,
		pids, started).Scan(new(bool), &alivePIDs, &aliveStarted)
	if err != nil {
		return nil, err
	}
	alive := make([]pgSession, len(alivePIDs))
	for i := range alivePIDs {
		alive[i] = pgSession{alivePIDs[i], aliveStarted[i]}
	}
	return alive, nil
}

func (f *pgFlusher) disconnect() {
	f.gen.Store(0)
	if f.conn != nil {
		f.conn.Close(context.Background())
		f.conn = nil
	}
}

// close flushes what is waiting and ends the flusher; the writer has stopped.
func (f *pgFlusher) close() {
	close(f.stop)
	<-f.done
}
