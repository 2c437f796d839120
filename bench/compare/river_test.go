package compare

// River (github.com/riverqueue/river v0.51.2, its SQLite driver riversqlite and its
// migrations) run through the same work as goqite: a fresh file per queue with the
// DSN of goqite's modernc driver (WAL, synchronous=FULL, busy_timeout,
// _txlock=immediate) and one connection, as riversqlite's documentation asks.
//
// Go cannot add sub-benchmarks to BenchmarkDrain, BenchmarkIngest and
// BenchmarkWakeup from another file, so River's live in BenchmarkDrainRiver,
// BenchmarkIngestRiver and BenchmarkWakeupRiver, which the same -bench patterns
// (Drain|Ingest, Wakeup) select and which share the run's floor.
//
// River's fetch cadence is configurable, so the drain and the wake-up run twice:
//
//   - defaults: FetchCooldown 100 ms (river.FetchCooldownDefault) and
//     FetchPollInterval 1 s (river.FetchPollIntervalDefault);
//   - fast: both at their minimums, 1 ms (river.FetchCooldownMin and
//     river.FetchPollIntervalMin). River adds jitter of max(10%, 10 ms) to every
//     poll, so "1 ms" polls every 1–11 ms.
//
// Everything else is River's default: leader election and its maintenance
// services, the batch completer, and SQLite's emulated LISTEN/NOTIFY (see
// BenchmarkWakeupRiver).

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/switchboardhq/switchboard/ingest"
)

// riverQueue is the one queue River's jobs go to and its client works.
const riverQueue = "bench"

// riverStall is how long a River benchmark waits without progress before failing.
const riverStall = 30 * time.Second

// riverSettings are the fetch settings River runs with.
var riverSettings = []struct {
	name                        string
	fetchCooldown, pollInterval time.Duration
}{
	{"defaults", river.FetchCooldownDefault, river.FetchPollIntervalDefault}, // 100 ms, 1 s
	{"fast", river.FetchCooldownMin, river.FetchPollIntervalMin},             // 1 ms, 1 ms
}

// riverArgs is a job carrying the ~2 KB payload. River stores args as JSON, so the
// payload (JSON itself) is kept raw rather than escaped into a string.
type riverArgs struct {
	Payload json.RawMessage `json:"payload"`
}

func (riverArgs) Kind() string { return "bench" }

func (riverArgs) InsertOpts() river.InsertOpts { return river.InsertOpts{Queue: riverQueue} }

// riverWorker runs work for every job.
type riverWorker struct {
	river.WorkerDefaults[riverArgs]
	work func(*river.Job[riverArgs]) error
}

func (w *riverWorker) Work(_ context.Context, job *river.Job[riverArgs]) error { return w.work(job) }

// BenchmarkDrainRiver: b.N jobs are inserted in one transaction, then a River
// client with MaxWorkers 8 on their queue works them all. Measured from Start until
// the b.N-th job_completed event: River's batch completer emits those only after
// the transaction that set the jobs' state to completed has committed (with
// synchronous=FULL, so on disk); a job whose Work has returned but whose completion
// still waits in the completer's batch is not counted. Afterwards river_job must
// hold exactly b.N rows, all completed, and Work must have run exactly b.N times.
//
// River fetches up to MaxWorkers-minus-running jobs per fetch (one write
// transaction that marks them running) and no sooner than FetchCooldown after the
// previous fetch, so with its defaults 8 workers take at most 8 jobs per 100 ms.
// It completes jobs in batches: one transaction per batch, every 250 ms, or on the
// next 50 ms tick once 100 are waiting.
func BenchmarkDrainRiver(b *testing.B) {
	for _, s := range riverSettings {
		b.Run("river-sqlite-"+s.name, func(b *testing.B) {
			db := openRiver(b)
			perSec := drainRiver(b, func(work func(*river.Job[riverArgs]) error) *river.Client[*sql.Tx] {
				client := newRiverWorkerClient(b, riversqlite.New(db), s.fetchCooldown, s.pollInterval, work)
				fillRiver(b, client, db, b.N)
				return client
			}, func(q string) *sql.Row { return db.QueryRow(q) })
			sqliteFloor.report(b, perSec)
		})
	}
}

// drainRiver is BenchmarkDrainRiver's run on any of River's drivers: setup makes a
// client that runs work and holds b.N jobs; the drain is timed from Start to the
// b.N-th job_completed event, and river_job (read through queryRow) must then hold
// exactly b.N completed jobs. It returns jobs per second.
func drainRiver[TTx any, R interface{ Scan(...any) error }](b *testing.B,
	setup func(work func(*river.Job[riverArgs]) error) *river.Client[TTx], queryRow func(string) R) float64 {
	b.Helper()
	var worked, bad atomic.Int64
	client := setup(func(job *river.Job[riverArgs]) error {
		worked.Add(1)
		// On PostgreSQL River keeps args as jsonb, which hands JSON back re-spaced.
		var compact bytes.Buffer
		if err := json.Compact(&compact, job.Args.Payload); err != nil || compact.Len() != len(payload) {
			bad.Add(1)
			return fmt.Errorf("job %d has a %d-byte payload, want %d", job.ID, compact.Len(), len(payload))
		}
		return nil
	})
	events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
		ChanSize: b.N + 64, // never full: a full channel drops events
		Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
	})
	defer cancel()

	// The clock includes Start and the completer's last batch (up to 250 ms):
	// under 3% of a 10,000-job drain.
	b.ResetTimer()
	start := time.Now()
	startRiver(b, client)
	stall := time.NewTimer(riverStall)
	defer stall.Stop()
	for completed := 0; completed < b.N; {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				b.Fatalf("job %d: %s (%d bad payloads)", ev.Job.ID, ev.Kind, bad.Load())
			}
			completed++
			stall.Reset(riverStall)
		case <-stall.C:
			b.Fatalf("no job completed for %v; %d of %d completed", riverStall, completed, b.N)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()

	if n := worked.Load(); n != int64(b.N) || bad.Load() != 0 {
		b.Fatalf("Work ran %d times for %d jobs (%d bad payloads)", n, b.N, bad.Load())
	}
	var total, completed int
	if err := queryRow(`SELECT count(*), count(*) FILTER (WHERE state = 'completed') FROM river_job`).Scan(&total, &completed); err != nil {
		b.Fatal(err)
	}
	if total != b.N || completed != b.N {
		b.Fatalf("river_job holds %d jobs, %d completed, after draining %d", total, completed, b.N)
	}
	return float64(b.N) / elapsed.Seconds()
}

// BenchmarkIngestRiver: BenchmarkIngest's 32 senders against the handler one
// would write in front of River: a bounded body, the GitHub signature checked in
// constant time, Insert (its own transaction), 202. The client only inserts: it has
// no queues and is never started.
func BenchmarkIngestRiver(b *testing.B) {
	secret, err := ingest.NewSecret("github")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("river-sqlite", func(b *testing.B) {
		db := openRiver(b)
		client, err := river.NewClient(riversqlite.New(db), &river.Config{Logger: quietLogger()})
		if err != nil {
			b.Fatal(err)
		}
		srv := httptest.NewServer(riverHandler(client, secret))
		defer srv.Close()
		send(b, sqliteFloor, srv.URL+"/webhooks/github", secret)
		wantRows(b, db, "river_job", b.N)
	})
}

// riverHandler is handRolled with client.Insert. River stores
// args as JSON, so the body goes in raw; GitHub's bodies are JSON, and one that is
// not fails the insert (503).
func riverHandler[TTx any](client *river.Client[TTx], secret string) http.Handler {
	return handRolled(secret, func(ctx context.Context, body []byte) error {
		_, err := client.Insert(ctx, riverArgs{Payload: body}, nil)
		return err
	})
}

// BenchmarkWakeupRiver: a started River client idle on an empty queue; one job is
// inserted (through the same client) at a point unknown to it, and the sample runs
// from Insert's return to the job's Work being entered. It holds River's fetch (the
// write that marks the job running) but not its insert; goqite's samples start
// before Send, so they hold Send's commit as well as Receive's. insert-p50-ms
// reports how long River's Insert took, to put beside that. Before the next sample
// the job's completion must be committed, and at least FetchCooldown must have
// passed since the previous insert, so that every sample starts idle.
//
// How an insert wakes the producer, from River v0.51.2's source: the SQLite driver
// reports SupportsListener and SupportsListenNotify, so the client does NOT poke
// its own producer in process (notifyProducerWithoutListenerJobFetch returns early
// for such drivers). Instead the insert's transaction appends a row to the
// river_notification outbox table (at most once per FetchCooldown per queue:
// insertNotifyLimiter), the notifier's listener polls that table every 50 ms
// (notificationPollIntervalDefault, not configurable), and the notification calls
// the producer's fetch limiter, which fetches at once unless it fetched within the
// last FetchCooldown. Independently, the producer fetches every FetchPollInterval
// (plus jitter). So with the defaults a job is usually picked up within ~50 ms (the
// outbox poll), but up to FetchCooldown (100 ms) later when the 1 s poll fetched
// just before; with the fast settings within ~1–11 ms (the fetch poll).
func BenchmarkWakeupRiver(b *testing.B) {
	for _, s := range riverSettings {
		b.Run("river-sqlite-"+s.name, func(b *testing.B) {
			ctx := context.Background()
			db := openRiver(b)
			entered := make(chan time.Time, b.N+8) // never blocks a worker
			client := newRiverWorkerClient(b, riversqlite.New(db), s.fetchCooldown, s.pollInterval, func(*river.Job[riverArgs]) error {
				entered <- time.Now()
				return nil
			})
			events, cancel := client.SubscribeConfig(&river.SubscribeConfig{
				ChanSize: b.N + 8,
				Kinds:    []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed},
			})
			defer cancel()
			startRiver(b, client)

			// insert inserts one job and returns its id and when Insert returned.
			var inserts []time.Duration
			insert := func() (int64, time.Time) {
				t0 := time.Now()
				res, err := client.Insert(ctx, riverArgs{Payload: json.RawMessage(payload)}, nil)
				if err != nil {
					b.Fatal(err)
				}
				now := time.Now()
				inserts = append(inserts, now.Sub(t0))
				return res.Job.ID, now
			}
			// await waits for the job to be entered and then completed, and returns
			// when it was entered.
			await := func(id int64) time.Time {
				var at time.Time
				select {
				case at = <-entered:
				case <-time.After(riverStall):
					b.Fatalf("job %d not worked within %v", id, riverStall)
				}
				select {
				case ev := <-events:
					if ev.Kind != river.EventKindJobCompleted || ev.Job.ID != id {
						b.Fatalf("event %s for job %d, want job_completed for job %d", ev.Kind, ev.Job.ID, id)
					}
				case <-time.After(riverStall):
					b.Fatalf("job %d not completed within %v", id, riverStall)
				}
				return at
			}

			// A first job shows the client is up and working before timing starts.
			id, last := insert()
			await(id)

			lat := make([]time.Duration, 0, b.N)
			inserts = inserts[:0]
			b.ResetTimer()
			for i := range b.N {
				time.Sleep(time.Until(last.Add(s.fetchCooldown)))
				// Insert at a point in the 100 ms window unknown to the client.
				time.Sleep(time.Duration(i*7919%100_000) * time.Microsecond)
				id, last = insert()
				lat = append(lat, await(id).Sub(last))
			}
			b.StopTimer()

			var n int
			if err := db.QueryRow(`SELECT count(*) FROM river_job WHERE state = 'completed'`).Scan(&n); err != nil || n != b.N+1 {
				b.Fatalf("river_job holds %d completed jobs after %d (%v)", n, b.N+1, err)
			}
			p50, p99 := percentiles(lat)
			b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
			insertP50, _ := percentiles(inserts)
			b.ReportMetric(float64(insertP50.Microseconds())/1000, "insert-p50-ms")
		})
	}
}

// openRiver opens a fresh file with goqite's modernc DSN and River's schema.
func openRiver(b *testing.B) *sql.DB {
	b.Helper()
	db := openSQLite(b, modernc, "river.db")
	migrator, err := rivermigrate.New(riversqlite.New(db), &rivermigrate.Config{Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := migrator.Migrate(context.Background(), rivermigrate.DirectionUp, nil); err != nil {
		b.Fatalf("river migrations: %v", err)
	}
	return db
}

// newRiverWorkerClient returns a client that works riverQueue with 8 workers
// running work, at the given fetch settings; start it with startRiver.
func newRiverWorkerClient[TTx any](b *testing.B, driver riverdriver.Driver[TTx], fetchCooldown, pollInterval time.Duration,
	work func(*river.Job[riverArgs]) error) *river.Client[TTx] {
	b.Helper()
	ws := river.NewWorkers()
	river.AddWorker(ws, &riverWorker{work: work})
	client, err := river.NewClient(driver, &river.Config{
		FetchCooldown:     fetchCooldown,
		FetchPollInterval: pollInterval,
		Logger:            quietLogger(),
		Queues:            map[string]river.QueueConfig{riverQueue: {MaxWorkers: workers}},
		Workers:           ws,
	})
	if err != nil {
		b.Fatal(err)
	}
	return client
}

// startRiver starts client and stops it when the benchmark ends (before its
// database is closed: cleanups run last-registered first).
func startRiver[TTx any](b *testing.B, client *river.Client[TTx]) {
	b.Helper()
	if err := client.Start(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := client.Stop(ctx); err != nil {
			b.Errorf("stop river: %v", err)
		}
	})
}

// fillRiver inserts n jobs in one transaction, so filling takes seconds, not n
// durable commits.
func fillRiver(b *testing.B, client *river.Client[*sql.Tx], db *sql.DB, n int) {
	b.Helper()
	ctx := context.Background()
	params := make([]river.InsertManyParams, n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: riverArgs{Payload: json.RawMessage(payload)}}
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := client.InsertManyTx(ctx, tx, params); err != nil {
		tx.Rollback()
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
}
