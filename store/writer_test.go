package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// holdWriter occupies the writer goroutine until the returned func is called, so
// that requests made meanwhile queue up and commit together as one batch.
func holdWriter(t *testing.T, s *Store) (release func()) {
	t.Helper()
	entered := make(chan struct{})
	gate := make(chan struct{})
	go s.write(context.Background(), func(w *wtx) error {
		close(entered)
		<-gate
		return nil
	})
	<-entered
	return func() { close(gate) }
}

// waitQueued waits until n requests are queued behind a held writer.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(s.writer.reqs) < n {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d requests queued", len(s.writer.reqs), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestGroupCommitIsolatesFailingRequests(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	release := holdWriter(t, s)
	before := s.WriterStats()

	const n = 12
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			errs[i] = s.write(ctx, func(w *wtx) error {
				if _, err := w.addTodo(NewTodo{Queue: "q", Payload: fmt.Sprintf("req-%d", i)}); err != nil {
					return err
				}
				if i%3 == 0 {
					// Fails after writing: its insert must be undone, the others kept.
					return fmt.Errorf("request %d gives up", i)
				}
				return nil
			})
		}(i)
	}
	waitQueued(t, s, n)
	release()
	wg.Wait()

	after := s.WriterStats()
	if got := after.Batches - before.Batches; got != 2 {
		t.Errorf("%d transactions, want 2 (the holder's and one batch of %d)", got, n)
	}
	for i := 0; i < n; i++ {
		var count int
		s.rdb.QueryRow(s.q(`SELECT count(*) FROM todo_payloads WHERE payload = ?`), fmt.Sprintf("req-%d", i)).Scan(&count)
		if i%3 == 0 {
			if errs[i] == nil || count != 0 {
				t.Errorf("failing request %d: err=%v rows=%d, want an error and no row", i, errs[i], count)
			}
		} else if errs[i] != nil || count != 1 {
			t.Errorf("request %d: err=%v rows=%d, want success and one row", i, errs[i], count)
		}
	}
	// The failed requests' audit rows went with them.
	var audits int
	s.rdb.QueryRow(`SELECT count(*) FROM audit WHERE action = 'todo.add'`).Scan(&audits)
	if audits != n-n/3 {
		t.Errorf("%d audit rows, want %d", audits, n-n/3)
	}
}

func TestConcurrentWritersNeverBusy(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	const writers, each = 48, 40
	var wg sync.WaitGroup
	errc := make(chan error, writers*each)
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				if _, err := s.AddTodo(ctx, NewTodo{Queue: fmt.Sprintf("q%d", g%4), Payload: "x"}); err != nil {
					errc <- err
				}
			}
		}(g)
	}
	// Readers at the same time must not disturb the writer either.
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 50; i++ {
				if _, err := s.QueueCounts(ctx); err != nil {
					errc <- err
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatalf("concurrent write failed: %v", err)
	}
	var n int
	s.rdb.QueryRow(`SELECT count(*) FROM todos`).Scan(&n)
	if n != writers*each {
		t.Fatalf("%d todos, want %d", n, writers*each)
	}
	st := s.WriterStats()
	t.Logf("%d requests in %d transactions", st.Requests, st.Batches)
}

// TestDiskFull stands in for a full disk with max_page_count, which makes SQLite
// answer SQLITE_FULL exactly as a full filesystem does. The caller gets an error,
// nothing is half-written, and writes work again once space returns.
func TestDiskFull(t *testing.T) {
	testkit.SQLiteOnly(t, "a full disk stood in for by SQLite's max_page_count")
	s := openTest(t, Options{})
	ctx := context.Background()
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: "before"}); err != nil {
		t.Fatal(err)
	}
	var pages int
	s.writer.conn.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages)
	setMax := func(n int) {
		// The writer goroutine is idle between requests; run on its connection
		// from inside a write so nothing else uses it at the same moment.
		s.write(ctx, func(w *wtx) error {
			_, err := w.w.conn.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, n))
			return err
		})
	}
	setMax(pages)
	big := strings.Repeat("x", 256<<10)
	_, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: big})
	if err == nil {
		t.Fatal("a write that does not fit succeeded")
	}
	if !strings.Contains(err.Error(), "full") {
		t.Logf("error: %v", err)
	}
	// Several writers at once while full: each gets an error, none half-writes.
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: big}); err == nil {
				t.Error("write succeeded on a full disk")
			}
		}()
	}
	wg.Wait()
	var n, audits int
	s.rdb.QueryRow(`SELECT count(*) FROM todos`).Scan(&n)
	s.rdb.QueryRow(`SELECT count(*) FROM audit`).Scan(&audits)
	if n != 1 || audits != 1 {
		t.Fatalf("after failed writes: %d todos, %d audit rows; want 1 and 1", n, audits)
	}
	setMax(1 << 30) // space returns
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: big}); err != nil {
		t.Fatalf("write after space returned: %v", err)
	}
	var ok string
	s.rdb.QueryRow(`PRAGMA integrity_check`).Scan(&ok)
	if ok != "ok" {
		t.Fatalf("integrity_check: %s", ok)
	}
}

func TestCloseFinishesAcceptedWrites(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	release := holdWriter(t, s)
	var wg sync.WaitGroup
	errs := make(chan error, 5)
	for i := 0; i < 5; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: "x"})
			errs <- err
		}()
	}
	waitQueued(t, s, 5)
	go func() { time.Sleep(10 * time.Millisecond); release() }()
	s.writer.close()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("accepted write failed at close: %v", err)
		}
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: "late"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("write after close: %v, want ErrClosed", err)
	}
}

// The crash test re-runs this test binary as a child that writes and prints the id
// of each acknowledged write, and SIGKILLs it at a random moment. Every printed id
// must survive, and the file must pass integrity_check.
const crashChildEnv = "SWITCHBOARD_CRASH_CHILD_DB"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		return
	}
	os.Exit(m.Run())
}

func crashChild(path string) {
	ctx := context.Background()
	s, err := Open(ctx, path, Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	out := bufio.NewWriter(os.Stdout)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				t, err := s.AddTodo(ctx, NewTodo{Queue: "crash", Payload: strings.Repeat("p", 300)})
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(4)
				}
				mu.Lock()
				fmt.Fprintln(out, t.ID)
				out.Flush()
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
}

func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs child processes; skipped in -short")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	acked := map[int64]bool{}
	for round := 0; round < 5; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var stderr strings.Builder
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		killAfter := 20 + rand.IntN(200)
		sc := bufio.NewScanner(stdout)
		lines := 0
		for sc.Scan() {
			id, err := strconv.ParseInt(sc.Text(), 10, 64)
			if err != nil {
				t.Fatalf("child printed %q", sc.Text())
			}
			acked[id] = true
			lines++
			if lines == killAfter {
				cmd.Process.Signal(syscall.SIGKILL)
			}
		}
		cmd.Wait()
		if lines < killAfter {
			t.Fatalf("round %d: child stopped after %d writes: %s", round, lines, stderr.String())
		}
	}
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatalf("reopen after crashes: %v", err)
	}
	defer s.Close()
	var ok string
	s.rdb.QueryRow(`PRAGMA integrity_check`).Scan(&ok)
	if ok != "ok" {
		t.Fatalf("integrity_check after crashes: %s", ok)
	}
	missing := 0
	for id := range acked {
		var n int
		s.rdb.QueryRow(`SELECT count(*) FROM todos WHERE id = ?`, id).Scan(&n)
		if n != 1 {
			missing++
		}
	}
	if missing > 0 {
		t.Fatalf("%d of %d acknowledged writes lost", missing, len(acked))
	}
	t.Logf("%d acknowledged writes across 5 SIGKILLs, all present", len(acked))
}

// BenchmarkWrite measures durable commits/s through the writer with one writer and
// with 16 concurrent writers (synchronous=FULL). Group commit should make the
// concurrent figure several times the single one.
func BenchmarkWrite(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			s := openTest(b, Options{})
			ctx := context.Background()
			payload := strings.Repeat("p", 200)
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			per := (b.N + writers - 1) / writers
			for g := 0; g < writers; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := 0; i < per; i++ {
						if _, err := s.AddTodo(ctx, NewTodo{Queue: "bench", Payload: payload}); err != nil {
							b.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			el := time.Since(start)
			b.ReportMetric(float64(per*writers)/el.Seconds(), "commits/s")
			st := s.WriterStats()
			b.ReportMetric(float64(st.Requests)/float64(max(st.Batches, 1)), "writes/fsync")
		})
	}
}

// BenchmarkFloor is the raw durable single-row commit rate of this disk with the
// same pragmas, without the writer: the figure other throughputs are compared to.
func BenchmarkFloor(b *testing.B) {
	path := filepath.Join(b.TempDir(), "floor.db")
	rate, err := MeasureFloor(context.Background(), path, Options{}, time.Duration(b.N)*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(rate, "commits/s")
}

// A caller whose context ends while its statement runs must not take the other
// requests of its group commit down with it (an interrupted SQLite write rolls back
// the whole transaction).
func TestCancelledCallerDoesNotFailItsBatch(t *testing.T) {
	s := openTest(t, Options{})
	release := holdWriter(t, s)
	slowCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make(chan struct{})
	slow := make(chan error, 1)
	go func() {
		slow <- s.write(slowCtx, func(w *wtx) error {
			close(started)
			// Long enough for the cancel below to land mid-statement: a
			// quarter of a second or more on either database (minutes under
			// the race detector at ten times the count).
			var n int64
			if err := w.queryRow(`WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM c WHERE i < 200000)
				SELECT count(*) FROM c`).Scan(&n); err != nil {
				return err
			}
			_, err := w.addTodo(NewTodo{Queue: "q", Payload: "slow"})
			return err
		})
	}()
	waitQueued(t, s, 1)
	other := make(chan error, 1)
	go func() {
		_, err := s.AddTodo(context.Background(), NewTodo{Queue: "q", Payload: "bystander"})
		other <- err
	}()
	waitQueued(t, s, 2)
	release()
	<-started
	time.Sleep(20 * time.Millisecond)
	cancel()
	if err := <-other; err != nil {
		t.Fatalf("a bystander in the same commit failed: %v", err)
	}
	if err := <-slow; err != nil {
		t.Fatalf("the cancelled caller's started write failed: %v", err)
	}
	var n int
	s.rdb.QueryRow(`SELECT count(*) FROM todo_payloads WHERE payload IN ('slow', 'bystander')`).Scan(&n)
	if n != 2 {
		t.Fatalf("%d of 2 writes committed", n)
	}
}

// WriterStats times the writer: a committed write adds to both Busy and Commit, a
// lone write that fails is rolled back and adds to Busy only, and the time inside
// COMMIT is always part of the busy time.
func TestWriterStatsTimes(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	before := s.WriterStats()
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	committed := s.WriterStats()
	if committed.Commit <= before.Commit || committed.Busy <= before.Busy {
		t.Errorf("after a commit: %+v, before: %+v; want Busy and Commit to grow", committed, before)
	}
	failed := errors.New("gives up")
	if err := s.write(ctx, func(w *wtx) error { return failed }); !errors.Is(err, failed) {
		t.Fatalf("write: %v, want %v", err, failed)
	}
	rolledBack := s.WriterStats()
	if rolledBack.Commit != committed.Commit {
		t.Errorf("a rolled-back write changed Commit from %v to %v", committed.Commit, rolledBack.Commit)
	}
	if rolledBack.Busy <= committed.Busy {
		t.Errorf("a rolled-back write left Busy at %v", rolledBack.Busy)
	}
	if rolledBack.Commit > rolledBack.Busy {
		t.Errorf("Commit %v exceeds Busy %v", rolledBack.Commit, rolledBack.Busy)
	}
}

// A batch of writes that may run again runs without savepoints; when one of
// them fails after writing, the batch runs again with them: the failed write
// leaves nothing, the others commit once.
func TestBareBatchRunsAgainWhenAWriteFails(t *testing.T) {
	s := openTest(t, Options{})
	if s.pg {
		t.Skip("PostgreSQL pipelines such batches instead (pipeline.go)")
	}
	ctx := context.Background()
	runs := map[string]int{}
	write := func(name string, fail bool) func() error {
		return func() error {
			return s.submit(ctx, againReq(ctx, func(w *wtx) error {
				runs[name]++ // the writer goroutine alone runs fns
				if err := w.audit("test", "test."+name, "", "", ""); err != nil {
					return err
				}
				if fail {
					return errors.New("refused after writing")
				}
				return nil
			}))
		}
	}
	errs := make([]error, 3)
	before := s.WriterStats()
	inOneBatch(t, s,
		func() { errs[0] = write("a", false)() },
		func() { errs[1] = write("b", true)() },
		func() { errs[2] = write("c", false)() })
	after := s.WriterStats()
	if errs[0] != nil || errs[2] != nil || errs[1] == nil || !strings.Contains(errs[1].Error(), "refused") {
		t.Fatalf("answers %v; want a and c stored, b refused", errs)
	}
	if after.Reruns-before.Reruns != 1 || after.Batches-before.Batches != 1 {
		t.Errorf("%d reruns in %d batches; want the batch run bare, then once again", after.Reruns-before.Reruns,
			after.Batches-before.Batches)
	}
	for name, want := range map[string]int{"a": 1, "b": 0, "c": 1} {
		if n := auditCount(t, s, "test."+name); n != want {
			t.Errorf("%d audit rows of %s, want %d", n, name, want)
		}
	}
	if runs["a"] != 2 || runs["b"] != 2 || runs["c"] != 1 {
		t.Errorf("runs %v; want a and b run twice (bare, then under savepoints), c once (after b failed bare)", runs)
	}
}

// A write whose caller gives up after its bare run, when another write of the
// batch failed there, is skipped when the batch runs again: it is answered with
// its caller's error, and with nothing the rolled-back run left behind (a todo
// "claimed" beside ok, a todo "done" beside the error).
func TestSkippedOnTheRerunAnswersNoResultOfTheBareRun(t *testing.T) {
	s := openTest(t, Options{})
	if s.pg {
		t.Skip("PostgreSQL pipelines such batches instead (pipeline.go)")
	}
	queues := []string{"inbox"}
	addTodos(t, s, "inbox", 4)
	ack := claimOne(t, s, "agent:a", queues)
	claimCtx, cancelClaim := context.WithCancel(context.Background())
	defer cancelClaim()
	ackCtx, cancelAck := context.WithCancel(context.Background())
	defer cancelAck()
	var claimedTodo, done Todo
	var ok bool
	var next Next
	var claimErr, ackErr error
	before := s.WriterStats()
	inOneBatch(t, s,
		func() { claimedTodo, ok, claimErr = s.ClaimNext(claimCtx, "agent:b", queues, time.Minute) },
		func() { done, next, ackErr = s.CompleteThenClaim(ackCtx, ack, "ok", queues, time.Minute) },
		func() {
			// Both callers give up while the batch runs bare, and it runs again.
			s.submit(context.Background(), againReq(context.Background(), func(w *wtx) error {
				cancelClaim()
				cancelAck()
				return errors.New("refused")
			}))
		})
	if s.WriterStats().Reruns-before.Reruns != 1 {
		t.Fatalf("the batch did not run again")
	}
	if !errors.Is(claimErr, context.Canceled) || ok || claimedTodo.ID != 0 {
		t.Errorf("claim answered todo %d, ok %v, %v; want nothing beside context.Canceled", claimedTodo.ID, ok, claimErr)
	}
	if !errors.Is(ackErr, context.Canceled) || done.ID != 0 || next.OK {
		t.Errorf("complete answered todo %d (%s), next %+v, %v; want nothing beside context.Canceled",
			done.ID, done.State, next, ackErr)
	}
	if cur, err := s.Todo(context.Background(), ack.ID); err != nil || cur.State != StateClaimed {
		t.Errorf("todo %d is %s (%v); want it still claimed", ack.ID, cur.State, err)
	}
}
