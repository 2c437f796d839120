package store

import (
	"context"
	"database/sql"
	"errors"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// gateSync makes each of the writer's WAL syncs report its start on started and
// then wait for a value on results: nil to go on and sync, an error to fail. The
// gate opens for good when the test ends, so that a failed test can still close
// the store.
func gateSync(t *testing.T, s *Store) (started chan struct{}, results chan error) {
	started, results = make(chan struct{}, 16), make(chan error)
	t.Cleanup(func() { close(results) })
	real := s.writer.syncWAL
	s.writer.syncWAL = func() error {
		started <- struct{}{}
		if err := <-results; err != nil {
			return err
		}
		return real()
	}
	return started, results
}

// waitStarted waits for the next gated sync to start.
func waitStarted(t *testing.T, started chan struct{}) {
	t.Helper()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the write's WAL was never synced")
	}
}

// answeredAfterSync checks that a write held in its sync is not answered until
// the sync is let go, and then is answered without error.
func answeredAfterSync(t *testing.T, answered chan error, results chan error) {
	t.Helper()
	select {
	case err := <-answered:
		t.Fatalf("the write was answered (%v) before its WAL sync returned", err)
	case <-time.After(50 * time.Millisecond):
	}
	results <- nil
	if err := <-answered; err != nil {
		t.Fatal(err)
	}
}

// addTodoAsync adds a todo on queue q from another goroutine and reports the
// answer on the returned channel.
func addTodoAsync(s *Store, payload string) chan error {
	answered := make(chan error, 1)
	go func() {
		_, err := s.AddTodo(context.Background(), NewTodo{Queue: "q", Payload: payload})
		answered <- err
	}()
	return answered
}

func countPayloads(t *testing.T, s *Store, payload string) int {
	t.Helper()
	var n int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM todo_payloads WHERE payload = ?`, payload).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// With synchronous=FULL a write is committed and announced, then the WAL is
// synced, and only then is the caller answered.
func TestWriteIsAnsweredAfterItsWALSync(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	s := openTest(t, Options{})
	announced := make(chan TodoChange, 1)
	s.OnTodoChange(func(c TodoChange) { announced <- c })
	started, results := gateSync(t, s)

	answered := addTodoAsync(s, "first")
	waitStarted(t, started)
	select {
	case c := <-announced:
		if c.Queue != "q" || !c.Claimable {
			t.Fatalf("announced %+v", c)
		}
	default:
		t.Fatal("the todo was not announced before the sync")
	}
	if n := countPayloads(t, s, "first"); n != 1 {
		t.Fatalf("%d committed todos while the sync runs, want 1", n)
	}
	answeredAfterSync(t, answered, results)
}

// A failed sync fails the writes it covered, saying they may be committed, and
// stops all writing: what reached the disk is only known after a restart.
func TestFailedWALSyncStopsWrites(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	s := openTest(t, Options{})
	ctx := context.Background()
	started, results := gateSync(t, s)
	answered := addTodoAsync(s, "unsure")
	waitStarted(t, started)
	diskErr := errors.New("input/output error")
	results <- diskErr
	err := <-answered
	if !errors.Is(err, diskErr) || !strings.Contains(err.Error(), "may not be on disk") {
		t.Fatalf("write whose sync failed: %v", err)
	}
	later := addTodoAsync(s, "later")
	select {
	case err := <-later:
		if err == nil || !strings.Contains(err.Error(), "restart") {
			t.Fatalf("a write after the failed sync: %v, want a refusal that says to restart", err)
		}
	case <-started:
		t.Fatal("a write after the failed sync was committed and reached a sync")
	case <-time.After(10 * time.Second):
		t.Fatal("a write after the failed sync got no answer")
	}
	if err := s.exclusive(ctx, func(*sql.Conn) error { return nil }); err == nil {
		t.Fatal("an exclusive write after the failed sync was run")
	}
	if n := countPayloads(t, s, "later"); n != 0 {
		t.Fatal("a write after a failed sync was committed")
	}
	// Ping fails too, so the systemd watchdog restarts the service.
	if err := s.Ping(ctx); err == nil || !errors.Is(err, diskErr) {
		t.Fatalf("Ping after a failed sync: %v", err)
	}
}

// The writer syncs the file SQLite writes the WAL to, also when the database is
// reached through a symlink.
func TestWALSyncFindsTheWALThroughASymlink(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	dir := t.TempDir()
	realDir := filepath.Join(dir, "real")
	if err := os.Mkdir(realDir, 0o700); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "sb.db")
	if err := os.Symlink(filepath.Join(realDir, "sb.db"), link); err != nil {
		t.Fatal(err)
	}
	// The symlink points at a file that does not exist yet; SQLite creates it.
	s, err := Open(context.Background(), link, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AddTodo(context.Background(), NewTodo{Queue: "q", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	written, err := os.Stat(filepath.Join(realDir, "sb.db-wal"))
	if err != nil {
		t.Fatalf("SQLite's WAL: %v", err)
	}
	synced, err := s.writer.wal.f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(written, synced) {
		t.Fatalf("the writer synced %s, not the WAL SQLite writes", s.writer.wal.path)
	}
}

// A statement run outside a transaction may commit too (PRAGMA optimize runs
// ANALYZE); it is answered after a sync of the WAL as well.
func TestExclusiveWritesAreSynced(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	s := openTest(t, Options{})
	ctx := context.Background()
	started, results := gateSync(t, s)
	answered := make(chan error, 1)
	go func() {
		answered <- s.exclusive(ctx, func(c *sql.Conn) error {
			_, err := c.ExecContext(ctx, `PRAGMA user_version = 7`)
			return err
		})
	}()
	waitStarted(t, started)
	answeredAfterSync(t, answered, results)
}

// A hook that panics runs on the writer goroutine; the writer logs it and goes
// on, and the write that announced the change is still answered.
func TestPanickingHookDoesNotStopTheWriter(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	s := openTest(t, Options{})
	ctx := context.Background()
	s.OnTodoChange(func(c TodoChange) {
		if c.Queue == "boom" {
			panic("hook bug")
		}
	})
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "boom", Payload: "x"}); err != nil {
		t.Fatalf("the write whose hook panicked: %v", err)
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: "after"}); err != nil {
		t.Fatalf("a write after a panicking hook: %v", err)
	}
}

// The WAL is synced with a raw system call only where that cannot stall the
// process: with more than one P, and not for a while after a slow raw sync.
func TestRawSyncOnlyWithPsToSpareAndAQuickDisk(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	var never time.Time
	for _, c := range []struct {
		procs   int
		rawFrom time.Time
		raw     bool
	}{
		{2, never, true},
		{8, t0, true}, // the pause has just ended
		{2, t0.Add(time.Nanosecond), false},
		{1, never, false},
	} {
		if got := rawSync(c.procs, t0, c.rawFrom); got != c.raw {
			t.Errorf("rawSync(%d Ps, at %v, raw from %v) = %v, want %v", c.procs, t0, c.rawFrom, got, c.raw)
		}
	}

	for _, c := range []struct {
		raw  bool
		took time.Duration
		want time.Time
	}{
		{true, rawSyncMax, never},   // quick enough
		{false, time.Second, never}, // a usual sync is not judged
		{true, 40 * time.Millisecond, t0.Add(40*time.Millisecond + rawSyncPause)}, // an SD card
	} {
		if got := nextRawSync(c.raw, t0, c.took, never); !got.Equal(c.want) {
			t.Errorf("after a sync (raw %v) of %v: raw from %v, want %v", c.raw, c.took, got, c.want)
		}
	}
	// A pause already running is kept by a quick sync.
	if got := nextRawSync(true, t0, time.Millisecond, t0.Add(time.Minute)); !got.Equal(t0.Add(time.Minute)) {
		t.Errorf("a quick sync moved the pause to %v", got)
	}
}
