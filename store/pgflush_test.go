package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// flushWith makes s's flusher run flush in place of its own.
func flushWith(s *Store, flush func(context.Context, *pgx.Conn) error) {
	f := s.writer.flusher
	f.mu.Lock()
	f.flushOn = flush
	f.mu.Unlock()
}

// addAsync adds a todo to inbox on another goroutine; its answer comes on the
// channel.
func addAsync(s *Store, payload string) <-chan error {
	answered := make(chan error, 1)
	go func() {
		_, err := s.AddTodo(context.Background(), NewTodo{Queue: "inbox", Payload: payload})
		answered <- err
	}()
	return answered
}

// countTodos counts the todos another connection sees committed.
func countTodos(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM todos`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// On PostgreSQL a write is committed without waiting for the disk, and
// answered only once the flusher's own commit, made after it, is on disk.
func TestWriteIsAnsweredOnlyAfterItsFlush(t *testing.T) {
	s := openTest(t, Options{})
	if !s.pg {
		t.Skip("PostgreSQL only: SQLite's writer syncs the WAL itself (TestWriterSyncsWALBeforeAnswering)")
	}
	entered, release := make(chan struct{}), make(chan struct{})
	flushWith(s, func(ctx context.Context, conn *pgx.Conn) error {
		entered <- struct{}{}
		<-release
		return pgFlush(ctx, conn)
	})
	answered := addAsync(s, "waits for the flush")
	<-entered
	if n := countTodos(t, s); n != 1 {
		t.Fatalf("while the flush runs, readers see %d todos, want the one committed", n)
	}
	select {
	case err := <-answered:
		t.Fatalf("the write was answered (%v) before its flush ended", err)
	default:
	}
	close(release)
	if err := <-answered; err != nil {
		t.Fatalf("after the flush the write answered %v", err)
	}
}

// A flush that fails answers its writes with its error (they committed, but
// whether the disk has them is unknown); the next flush connects again.
func TestAFailedFlushFailsItsWrites(t *testing.T) {
	s := openTest(t, Options{})
	if !s.pg {
		t.Skip("PostgreSQL only: the flusher is PostgreSQL's")
	}
	broke := errors.New("the flush's connection broke")
	flushWith(s, func(context.Context, *pgx.Conn) error { return broke })
	if err := <-addAsync(s, "unconfirmed"); !errors.Is(err, broke) || !strings.Contains(err.Error(), "may not have it on disk") {
		t.Fatalf("a write whose flush failed answered %v", err)
	}
	flushWith(s, pgFlush)
	if err := <-addAsync(s, "confirmed"); err != nil {
		t.Fatalf("the next write answered %v", err)
	}
	if n := countTodos(t, s); n != 2 {
		t.Fatalf("%d todos, want both (the first committed, unconfirmed)", n)
	}
}

// A write committed before the server restarted is not confirmed by a flush on
// the server that came back: the crash may have lost it. One committed after
// the restart is.
func TestAFlushAfterARestartConfirmsNoEarlierCommit(t *testing.T) {
	c := testkit.StartCluster(t)
	s, err := Open(context.Background(), c.URL("postgres", c.Password, "postgres"),
		Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := <-addAsync(s, "confirmed before"); err != nil {
		t.Fatal(err) // the flusher is connected
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	flushWith(s, func(ctx context.Context, conn *pgx.Conn) error {
		once.Do(func() { // the retry, on a new connection, does not wait
			entered <- struct{}{}
			<-release
		})
		return pgFlush(ctx, conn)
	})
	answered := addAsync(s, "committed before the restart")
	<-entered
	c.Stop()
	c.Start()
	close(release)
	err = <-answered
	if err == nil || !strings.Contains(err.Error(), "the server restarted after it") {
		t.Fatalf("a write committed before the restart answered %v", err)
	}
	deadline := time.Now().Add(2 * time.Minute) // a guard against a hang, not a timing
	for {
		// The writer finds its connection gone at the first write after the
		// restart, and may fail that one write.
		err := <-addAsync(s, "after the restart")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no write succeeded after the restart: %v", err)
		}
	}
}
