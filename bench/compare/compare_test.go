// Package compare measures Switchboard's queue against what a self-hoster would
// otherwise build on: goqite, a persistent SQLite queue library, and River on its
// SQLite driver (river_test.go), each used as its documentation shows; and, when
// SWITCHBOARD_TEST_POSTGRES names a server, River on PostgreSQL against Switchboard's
// store on the same server (postgres_test.go). It is a
// module of its own so that goqite, River and a C SQLite driver never become
// dependencies of the appliance; it imports Switchboard's store through a replace.
//
// Every queue runs on a fresh file in the same temporary directory with WAL and
// synchronous=FULL, so an answered claim or completion is on disk, and every figure
// is also printed as a ratio to the same floor `switchboard bench` uses (durable
// single-row commits on that disk, measured once per run).
//
//	go test -run '^$' -bench . -benchtime 10000x
//	SWITCHBOARD_TEST_POSTGRES=postgres://… go test -run '^$' -bench Postgres -benchtime 10000x
package compare

import (
	"context"
	"database/sql"
	_ "embed"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit/teststore"
	"github.com/switchboardhq/switchboard/store"
	"maragu.dev/goqite"
	"modernc.org/sqlite"
)

// workers is the number of concurrent consumers, as `switchboard bench` drains with
// 8 agents.
const workers = 8

// payload is a ~2 KB JSON body, the size `switchboard bench` delivers.
var payload = `{"action":"opened","body":"` + strings.Repeat("x", 2000) + `"}`

//go:embed testdata/goqite_schema_sqlite.sql
var goqiteSchema string

// driver is a database/sql driver that goqite can run on, and the DSN that gives it
// WAL, synchronous=FULL, a busy timeout and BEGIN IMMEDIATE.
type driver struct {
	name string // database/sql driver name
	dsn  func(path string) string
}

var modernc = driver{"sqlite", func(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
}}

// drivers lists goqite's drivers: modernc (pure Go, as Switchboard) always, and
// mattn/go-sqlite3 (C, goqite's own choice) when cgo is on (see mattn_test.go).
var drivers = []driver{modernc}

// measuredFloor is a floor measured once per run, on first use.
type measuredFloor struct {
	once    sync.Once
	measure func() (float64, error)
	perSec  float64
	err     error
}

// sqliteFloor is the temporary directory's disk's, as the SQLite queues use it.
var sqliteFloor = &measuredFloor{measure: func() (float64, error) {
	dir, err := os.MkdirTemp("", "compare-floor-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	return store.MeasureFloor(context.Background(), filepath.Join(dir, "floor.db"),
		store.Options{Synchronous: store.SyncFull}, 2*time.Second)
}}

// report measures the floor if this run has not yet and reports perSec and its
// ratio to the floor.
func (f *measuredFloor) report(b *testing.B, perSec float64) {
	f.once.Do(func() { f.perSec, f.err = f.measure() })
	if f.err != nil {
		b.Fatalf("measure the floor: %v", f.err)
	}
	b.ReportMetric(perSec, "msgs/s")
	b.ReportMetric(perSec/f.perSec, "×floor")
	rates.add(b.Name(), b.N, perSec)
}

// BenchmarkDrain: b.N messages are queued, then 8 workers each loop receive →
// delete (goqite) or claim_next → complete (Switchboard) until the queue is empty.
// Every step is its own durable write, as when each is an agent's call.
func BenchmarkDrain(b *testing.B) {
	for _, loop := range storeLoops {
		b.Run(loop.name, func(b *testing.B) {
			st := openSwitchboard(b)
			if err := st.SeedTodosForBench(context.Background(), "bench", b.N, payload); err != nil {
				b.Fatal(err)
			}
			sqliteFloor.report(b, drain(b, loop.step(st)))
		})
	}
	// Over MCP, through `switchboard bench` (mcp_test.go).
	b.Run("switchboard-mcp-two-call", func(b *testing.B) { mcpDrain(b, "two-call") })
	b.Run("switchboard-mcp-one-call", func(b *testing.B) { mcpDrain(b, "one-call") })
	for _, d := range drivers {
		b.Run("goqite-"+d.name, func(b *testing.B) {
			ctx := context.Background()
			q, db := openGoqite(b, d)
			fillGoqite(b, q, db, b.N)
			perSec := drain(b, func(int) (bool, error) {
				m, err := q.Receive(ctx)
				if err != nil || m == nil {
					return false, err
				}
				if len(m.Body) != len(payload) {
					return false, fmt.Errorf("received message %s has a %d-byte body, want %d", m.ID, len(m.Body), len(payload))
				}
				return true, q.Delete(ctx, m.ID)
			})
			sqliteFloor.report(b, perSec)
		})
	}
}

// storeLoops are the drain's loops on the store in process: claim_next then
// complete, two writes a todo, as the lease contract teaches; or complete with
// the claim of the next todo, one write a todo.
var storeLoops = []struct {
	name string
	step func(*store.Store) func(worker int) (bool, error)
}{{"switchboard-store", storeStep}, {"switchboard-store-one-call", storeStepOneCall}}

// storeStep is one worker's step on Switchboard's store: claim_next, check the
// payload, complete; each its own durable write, as when each is an agent's call.
func storeStep(st *store.Store) func(worker int) (bool, error) {
	ctx := context.Background()
	queues := []string{"bench"}
	return func(w int) (bool, error) {
		owner := fmt.Sprintf("agent:bench-%d", w)
		t, ok, err := st.ClaimNext(ctx, owner, queues, time.Minute)
		if err != nil || !ok {
			return false, err
		}
		if len(t.Payload) != len(payload) {
			return false, fmt.Errorf("claimed todo %d has a %d-byte payload, want %d", t.ID, len(t.Payload), len(payload))
		}
		_, err = st.Complete(ctx, store.Ack{ID: t.ID, Owner: owner, LeaseSeq: t.LeaseSeq, Queues: queues}, "")
		return err == nil, err
	}
}

// storeStepOneCall is storeStep with the one-call loop: each step completes the
// todo the worker holds and claims its next in the same write
// (CompleteThenClaim); a worker holding none claims first.
func storeStepOneCall(st *store.Store) func(worker int) (bool, error) {
	ctx := context.Background()
	queues := []string{"bench"}
	held := make([]*store.Todo, workers) // each worker's, touched by that worker alone
	return func(w int) (bool, error) {
		owner := fmt.Sprintf("agent:bench-%d", w)
		if held[w] == nil {
			t, ok, err := st.ClaimNext(ctx, owner, queues, time.Minute)
			if err != nil || !ok {
				return false, err
			}
			held[w] = &t
		}
		t := held[w]
		if len(t.Payload) != len(payload) {
			return false, fmt.Errorf("claimed todo %d has a %d-byte payload, want %d", t.ID, len(t.Payload), len(payload))
		}
		ack := store.Ack{ID: t.ID, Owner: owner, LeaseSeq: t.LeaseSeq, Queues: queues}
		_, next, err := st.CompleteThenClaim(ctx, ack, "", queues, time.Minute)
		if err == nil {
			err = next.Err
		}
		if err != nil {
			return false, err
		}
		held[w] = nil
		if next.OK {
			held[w] = &next.Todo
		}
		return true, nil
	}
}

// drain runs step on workers goroutines until each reports the queue empty, checks
// that b.N messages were handled, and returns messages per second.
func drain(b *testing.B, step func(worker int) (bool, error)) float64 {
	b.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		done int
		errs []error
	)
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n := 0
			for {
				ok, err := step(w)
				if err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				if !ok {
					break
				}
				n++
			}
			mu.Lock()
			done += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if len(errs) > 0 {
		b.Fatalf("%d workers failed; first: %v", len(errs), errs[0])
	}
	if done != b.N {
		b.Fatalf("drained %d of %d messages", done, b.N)
	}
	return float64(done) / elapsed.Seconds()
}

// BenchmarkWakeup: how long an idle goqite consumer takes to see a message sent
// while it waits, at a poll interval of 100 ms (goqite's jobs runner default) and
// 10 ms. Switchboard pushes instead of polling; `switchboard bench` measures that
// doorbell end to end over MCP.
func BenchmarkWakeup(b *testing.B) {
	for _, interval := range []time.Duration{100 * time.Millisecond, 10 * time.Millisecond} {
		b.Run(fmt.Sprintf("goqite-poll-%v", interval), func(b *testing.B) {
			ctx := context.Background()
			q, _ := openGoqite(b, modernc)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := range b.N {
				got := make(chan time.Time, 1)
				errc := make(chan error, 1)
				go func() {
					m, err := q.ReceiveAndWait(ctx, interval)
					got <- time.Now() // received: the doorbell's figure stops at the ring, too
					if err == nil && m != nil {
						err = q.Delete(ctx, m.ID)
					}
					errc <- err
				}()
				// Send at a point in the poll cycle unknown to the consumer.
				time.Sleep(time.Duration(i*7919%int(interval/time.Microsecond)) * time.Microsecond)
				sent := time.Now()
				if err := q.Send(ctx, goqite.Message{Body: []byte(payload)}); err != nil {
					b.Fatal(err)
				}
				at := <-got
				if err := <-errc; err != nil {
					b.Fatal(err)
				}
				lat = append(lat, at.Sub(sent))
			}
			b.StopTimer()
			p50, p99 := percentiles(lat)
			b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
		})
	}
}

// openSwitchboard opens Switchboard's store on a fresh file, as serve does with
// --synchronous FULL.
func openSwitchboard(b *testing.B) *store.Store {
	b.Helper()
	return teststore.Open(b, store.Options{Synchronous: store.SyncFull})
}

// openSQLite opens a fresh file through d on a single connection, as goqite's
// README (SQLite has one writer; more connections only contend for it) and
// riversqlite's documentation (it avoids SQLITE_BUSY between River's concurrent
// internal operations) both ask.
func openSQLite(b *testing.B, d driver, file string) *sql.DB {
	b.Helper()
	db, err := sql.Open(d.name, d.dsn(filepath.Join(b.TempDir(), file)))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	return db
}

// wantRows fails b unless table holds n rows.
func wantRows(b *testing.B, db *sql.DB, table string, n int) {
	b.Helper()
	var got int
	if err := db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&got); err != nil || got != n {
		b.Fatalf("%s holds %d rows after %d deliveries (%v)", table, got, n, err)
	}
}

func openGoqite(b *testing.B, d driver) (*goqite.Queue, *sql.DB) {
	b.Helper()
	db := openSQLite(b, d, "goqite.db")
	if _, err := db.Exec(goqiteSchema); err != nil {
		b.Fatalf("goqite schema on %s: %v", d.name, err)
	}
	return goqite.New(goqite.NewOpts{DB: db, Name: "bench", Timeout: time.Minute}), db
}

// fillGoqite sends n messages in one transaction, so filling takes seconds, not
// n durable commits.
func fillGoqite(b *testing.B, q *goqite.Queue, db *sql.DB, n int) {
	b.Helper()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	for range n {
		if err := q.SendTx(ctx, tx, goqite.Message{Body: []byte(payload)}); err != nil {
			tx.Rollback()
			b.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// percentiles returns the 50th and 99th percentiles of d by nearest rank, as
// `switchboard bench` reports them.
func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(p float64) time.Duration {
		return s[min(len(s)-1, max(0, int(math.Ceil(p*float64(len(s))))-1))]
	}
	return at(0.50), at(0.99)
}

// TestMain makes modernc's SQLite commit with fdatasync(2), as Switchboard's store
// and its floor do: the switch is process-wide, so without this goqite on modernc
// would sync with fsync or fdatasync depending on which benchmark ran first.
func TestMain(m *testing.M) {
	sqlite.Fdatasync(true)
	code := m.Run()
	rates.print(os.Stdout)
	os.Exit(code)
}
