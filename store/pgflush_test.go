package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// flushWith makes s's flusher run flush in place of its own.
func flushWith(s *Store, flush func(context.Context, *pgx.Conn, []pgSession) ([]pgSession, error)) {
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

// holdFirstFlush makes s's next flush wait, once its flush has begun (entered),
// until release is closed; later flushes (a retry on a new connection) run at
// once.
func holdFirstFlush(s *Store) (entered, release chan struct{}) {
	entered, release = make(chan struct{}), make(chan struct{})
	var once sync.Once
	flushWith(s, func(ctx context.Context, conn *pgx.Conn, sessions []pgSession) ([]pgSession, error) {
		once.Do(func() {
			entered <- struct{}{}
			<-release
		})
		return pgFlush(ctx, conn, sessions)
	})
	return entered, release
}

// On PostgreSQL a write is committed without waiting for the disk, and
// answered only once the flusher's own commit, made after it, is on disk.
func TestWriteIsAnsweredOnlyAfterItsFlush(t *testing.T) {
	s := openTest(t, Options{})
	if !s.pg {
		t.Skip("PostgreSQL only: SQLite's writer syncs the WAL itself (TestWriterSyncsWALBeforeAnswering)")
	}
	entered, release := holdFirstFlush(s)
	answered := addAsync(s, "waits for the flush")
	<-entered
	if n := countRows(t, s, "todos"); n != 1 {
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
	flushWith(s, func(context.Context, *pgx.Conn, []pgSession) ([]pgSession, error) { return nil, broke })
	if err := <-addAsync(s, "unconfirmed"); !errors.Is(err, broke) || !strings.Contains(err.Error(), "may not have it on disk") {
		t.Fatalf("a write whose flush failed answered %v", err)
	}
	flushWith(s, pgFlush)
	if err := <-addAsync(s, "confirmed"); err != nil {
		t.Fatalf("the next write answered %v", err)
	}
	if n := countRows(t, s, "todos"); n != 2 {
		t.Fatalf("%d todos, want both (the first committed, unconfirmed)", n)
	}
}

// A write committed before the server restarted is not confirmed by a flush on
// the server that came back: the crash may have lost it. One committed after
// the restart is.
func TestAFlushAfterARestartConfirmsNoEarlierCommit(t *testing.T) {
	c := testkit.StartCluster(t)
	s := openOn(t, c)
	if err := <-addAsync(s, "confirmed before"); err != nil {
		t.Fatal(err) // the flusher is connected
	}
	entered, release := holdFirstFlush(s)
	answered := addAsync(s, "committed before the restart")
	<-entered
	c.Stop()
	c.Start()
	close(release)
	if err := <-answered; err == nil || !strings.Contains(err.Error(), "ended before it was known to be on disk") {
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

// openOn opens a store on the cluster c, as serve would.
func openOn(t *testing.T, c *testkit.Cluster) *Store {
	t.Helper()
	s, err := Open(context.Background(), c.URL("postgres", c.Password, "postgres"),
		Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Every write answered is on disk: n writes one after another, each answered
// before the next is sent, cost the server at least n syncs of its log (a
// flush that wrote nothing to the log committed without one: 24 syncs for 200
// writes, the log writer's own).
func TestEachAnsweredWriteWasSynced(t *testing.T) {
	c := testkit.StartCluster(t)
	s := openOn(t, c)
	admin, err := pgx.Connect(context.Background(), c.URL("postgres", c.Password, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	// The server's own count: each process adds its syncs at the latest as it
	// exits.
	syncs := func() int64 {
		t.Helper()
		var n int64
		if err := admin.QueryRow(context.Background(), `SELECT wal_sync FROM pg_stat_wal`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if err := <-addAsync(s, "warm"); err != nil {
		t.Fatal(err)
	}
	const n = 100
	before := syncs()
	for i := range n {
		if err := <-addAsync(s, fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	writer, flusher := s.writer.session.pid, int64(0)
	if err := admin.QueryRow(context.Background(), `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
		WHERE datname = 'postgres' AND pid NOT IN ($1, pg_backend_pid()) AND query LIKE '%pg_logical_emit_message%'`,
		writer).Scan(&flusher); err != nil {
		t.Fatal(err)
	}
	s.Close() // its server processes report their counts as they exit
	for gone := false; !gone; {
		if err := admin.QueryRow(context.Background(), `SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity
			WHERE pid IN ($1, $2))`, writer, flusher).Scan(&gone); err != nil {
			t.Fatal(err)
		}
	}
	if got := syncs() - before; got < n {
		t.Fatalf("%d writes answered one after another, %d syncs of the log", n, got)
	}
}

// A crash of any server process makes PostgreSQL end every session and drop the
// log it had not written out, keeping its start time: a write committed before
// such a crash is not confirmed by a flush after it.
func TestAFlushAfterACrashConfirmsNoEarlierCommit(t *testing.T) {
	c := testkit.StartCluster(t)
	s := openOn(t, c)
	url := c.URL("postgres", c.Password, "postgres")
	if err := <-addAsync(s, "confirmed before"); err != nil {
		t.Fatal(err) // the flusher is connected
	}
	entered, release := holdFirstFlush(s)
	answered := addAsync(s, "committed before the crash")
	<-entered
	writer := s.writer.pid.Load() // the session that committed it
	victim, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if err := victim.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil { // as the kernel's OOM killer would
		t.Fatal(err)
	}
	// Back once a connection finds the writer's session ended: one made before
	// the postmaster learnt of the crash would find it still there.
	deadline := time.Now().Add(2 * time.Minute) // a guard against a hang, not a timing
	for {
		probe, err := pgx.Connect(context.Background(), url)
		if err == nil {
			var gone bool
			err = probe.QueryRow(context.Background(), `SELECT NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1)`,
				writer).Scan(&gone)
			probe.Close(context.Background())
			if err == nil && gone {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not come back after the crash: %v", err)
		}
	}
	close(release)
	if err := <-answered; err == nil || !strings.Contains(err.Error(), "ended before it was known to be on disk") {
		t.Fatalf("a write committed before the crash answered %v", err)
	}
}

// The flusher looks the writer's session up once for each of its connections,
// and again for a new session of the writer; every other flush only writes its
// record (the lookup cost the server 0.6 ms of CPU a flush).
func TestAFlushAsksAfterTheWritersSessionOnlyWhenNew(t *testing.T) {
	s := openTest(t, Options{})
	if !s.pg {
		t.Skip("PostgreSQL only: the flusher is PostgreSQL's")
	}
	if err := <-addAsync(s, "warm"); err != nil {
		t.Fatal(err) // the flusher is connected and has seen the writer's session
	}
	var mu sync.Mutex
	var asked []int
	failOnce := false
	flushWith(s, func(ctx context.Context, conn *pgx.Conn, sessions []pgSession) ([]pgSession, error) {
		mu.Lock()
		asked = append(asked, len(sessions))
		fail := failOnce
		failOnce = false
		mu.Unlock()
		if fail {
			return nil, errors.New("the flush's connection broke")
		}
		return pgFlush(ctx, conn, sessions)
	})
	took := func() []int {
		mu.Lock()
		defer mu.Unlock()
		got := asked
		asked = nil
		return got
	}
	write := func(what string) {
		t.Helper()
		if err := <-addAsync(s, what); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	for i := range 3 {
		write(fmt.Sprint("steady ", i))
	}
	if got := took(); !slices.Equal(got, []int{0, 0, 0}) {
		t.Fatalf("flushes on a connection that had seen the writer's session asked after %v sessions, want none", got)
	}

	// A new connection of the flusher's (after a failed flush) asks again, once.
	mu.Lock()
	failOnce = true
	mu.Unlock()
	write("after a failed flush")
	write("and the next")
	if got := took(); !slices.Equal(got, []int{0, 1, 0}) {
		t.Fatalf("around a new flusher connection the flushes asked after %v sessions, want [0 1 0]", got)
	}

	// A new session of the writer's is asked after before it is trusted.
	if _, err := s.rdb.ExecContext(context.Background(), `SELECT pg_terminate_backend($1)`, s.writer.pid.Load()); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute) // a guard against a hang, not a timing
	for {
		// The writer finds its connection gone at the first write after, and
		// may fail that one write.
		if err := <-addAsync(s, "after the writer reconnected"); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
	write("and the next")
	got := took()
	if len(got) < 2 || got[len(got)-2] != 1 || got[len(got)-1] != 0 {
		t.Fatalf("after the writer reconnected the flushes asked after %v sessions, want its new one once, then none", got)
	}
}
