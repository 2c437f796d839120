package store

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"
)

// On PostgreSQL the writer does not wait for its commits to reach the disk: its
// session commits with synchronous_commit off, and it goes on to the next batch
// while the flusher, on a connection of its own, commits a transaction of its
// own with the server's synchronous_commit. PostgreSQL writes its log in order,
// so that commit on disk means every commit before it is too; then the flusher
// answers the callers of every batch committed before it began. A batch's
// statements thus run while the previous batch's commit is being flushed, as
// two writers would, and nobody is told a write is stored before it is on disk.
// As on SQLite (see announce), other readers may see a batch for the instant
// before that: what they do with it is a later write, flushed after it.
//
// If the flush fails because its connection was lost, it connects again and
// flushes once more; that answers for the batches committed while the server
// that is there now was running (it notes when the server started, as the
// writer does). A batch committed before the server restarted, or any batch
// when the server cannot be reached, is answered with the error: its commit may
// or may not have reached the disk, as when a COMMIT's answer is lost.

// pgFlusher makes the writer's commits durable and answers their callers.
type pgFlusher struct {
	s       *Store
	cfg     *pgx.ConnConfig
	conn    *pgx.Conn // nil until the first flush, and after one failed
	life    int64     // when the server conn is on started (pgServerPIDAndLife)
	mu      sync.Mutex
	flushOn func(ctx context.Context, conn *pgx.Conn) error // pgFlush; tests replace it
	waiting []flushWait                                     // batches committed since the flush under way began
	kick    chan struct{}
	stop    chan struct{}
	done    chan struct{}
}

// flushWait is a committed batch's answer, and when the server it was
// committed on started.
type flushWait struct {
	life   int64
	answer func(error)
}

func newPGFlusher(s *Store) (*pgFlusher, error) {
	cfg, err := pgx.ParseConfig(s.dsn)
	if err != nil {
		return nil, fmt.Errorf("store: %s is not a PostgreSQL URL pgx can read", s.path)
	}
	f := &pgFlusher{s: s, cfg: cfg, flushOn: pgFlush,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go f.loop()
	return f, nil
}

// after has answer called once the commit just made, on the server that started
// at life, is on disk, or with the error that left that unknown.
func (f *pgFlusher) after(life int64, answer func(error)) {
	f.mu.Lock()
	f.waiting = append(f.waiting, flushWait{life, answer})
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
	err := f.flush(flushOn)
	if err != nil && had {
		err = f.flush(flushOn) // the connection was lost since the last flush: once more on a new one
	}
	for _, w := range waiting {
		switch {
		case err != nil:
			w.answer(err)
		case w.life != f.life:
			w.answer(errors.New("store: commit: the server restarted after it, so it may not be on disk"))
		default:
			w.answer(nil)
		}
	}
}

// flush connects if need be and runs the flush; a failure closes the
// connection.
func (f *pgFlusher) flush(flushOn func(context.Context, *pgx.Conn) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), redialTimeout)
	defer cancel()
	if f.conn == nil {
		conn, err := pgx.ConnectConfig(ctx, f.cfg.Copy())
		if err != nil {
			return fmt.Errorf("store: commit: make it durable: %w", f.s.unreachable(err))
		}
		var pid int64
		if err := conn.QueryRow(ctx, pgServerPIDAndLife).Scan(&pid, &f.life); err != nil {
			conn.Close(context.Background())
			return fmt.Errorf("store: commit: make it durable: %w", err)
		}
		f.conn = conn
	}
	if err := flushOn(ctx, f.conn); err != nil {
		f.disconnect()
		return fmt.Errorf("store: commit: the server may not have it on disk: %w", err)
	}
	return nil
}

// pgFlush commits a transaction that holds a transaction id, and so a commit
// record that the server flushes (and, with synchronous standbys, replicates)
// before it answers, at the server's synchronous_commit; every commit written
// before it is then durable too.
func pgFlush(ctx context.Context, conn *pgx.Conn) error {
	_, err := conn.Exec(ctx, `SELECT pg_current_xact_id()`)
	return err
}

func (f *pgFlusher) disconnect() {
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
