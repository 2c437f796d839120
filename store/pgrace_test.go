package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// Races only PostgreSQL can lose. On SQLite every process's writes queue for the
// file's one write lock; on PostgreSQL two processes' transactions run side by
// side at READ COMMITTED, and each check-then-act holds only by its row locks.
// Each test opens two *Store handles on one schema, as two serve processes do,
// and races them; they run whenever SWITCHBOARD_TEST_POSTGRES names a server.

// pgProcesses opens one PostgreSQL schema twice, each handle with its own clock
// (two hosts' clocks), as two serve processes on two machines do.
func pgProcesses(t *testing.T, clocks ...*testkit.Clock) []*Store {
	t.Helper()
	url := testkit.PostgresURL(t)
	var out []*Store
	for _, c := range clocks {
		s, err := Open(context.Background(), url, Options{Now: c.Now,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out
}

// race runs a and b at the same moment and waits for both.
func race(a, b func()) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for _, f := range []func(){a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f()
		}()
	}
	close(start)
	wg.Wait()
}

// countsAgree checks that queue_counts says what the todos are.
func countsAgree(t *testing.T, s *Store) {
	t.Helper()
	var off int
	err := s.rdb.QueryRow(`SELECT count(*) FROM (
		SELECT queue, state, count(*) AS n FROM todos GROUP BY queue, state) t
		FULL JOIN (SELECT queue, state, n FROM queue_counts WHERE n != 0) c USING (queue, state)
		WHERE t.n IS DISTINCT FROM c.n`).Scan(&off)
	if err != nil || off != 0 {
		t.Fatalf("queue_counts disagrees with the todos in %d rows (%v)", off, err)
	}
}

// Two processes, eight workers each, drain one queue (the second process's
// workers ask for two): every todo is claimed exactly once, and no claim fails
// for having met another's.
func TestTwoProcessesClaimEachTodoOnce(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	stores := pgProcesses(t, clock, clock)
	const n, workers = 400, 8
	ids := append(addTodos(t, stores[0], "inbox", n), addTodos(t, stores[1], "other", n/10)...)
	addTodos(t, stores[0], "quiet", 5) // claimable, but asked for by none

	var mu sync.Mutex
	claimed := map[int64]int{}
	var wg sync.WaitGroup
	for i := range 2 * workers {
		s, queues := stores[i%2], []string{"inbox"}
		if i%2 == 1 {
			queues = []string{"other", "inbox"}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				td, ok, err := s.ClaimNext(context.Background(), "agent:w", queues, time.Minute)
				if err != nil {
					t.Errorf("claim_next: %v", err)
					return
				}
				if !ok {
					return
				}
				mu.Lock()
				claimed[td.ID]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if claimed[id] != 1 {
			t.Errorf("todo %d claimed %d times, want once", id, claimed[id])
		}
	}
	if len(claimed) != len(ids) {
		t.Errorf("%d todos claimed, want the %d of inbox and other", len(claimed), len(ids))
	}
	var twice, quiet int
	if err := stores[1].rdb.QueryRow(`SELECT count(*) FROM todos WHERE queue != 'quiet'
		AND (state != 'claimed' OR attempts != 1 OR lease_seq != 1)`).Scan(&twice); err != nil || twice != 0 {
		t.Errorf("%d todos not claimed exactly once (%v)", twice, err)
	}
	if err := stores[1].rdb.QueryRow(`SELECT count(*) FROM todos WHERE queue = 'quiet' AND state = 'pending'`).
		Scan(&quiet); err != nil || quiet != 5 {
		t.Errorf("%d of the 5 todos of a queue no one asked for still pending (%v)", quiet, err)
	}
	countsAgree(t, stores[0])
}

// The worker heartbeats at the last instant of its lease by its host's clock,
// while the reaper on another host, whose clock is 2 ms ahead, finds the lease
// expired. Either may win, never both: the heartbeat kept the lease (and the
// reaper left the todo claimed), or the reaper requeued it (and the heartbeat
// is a conflict).
func TestHeartbeatRacingTheReaper(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	workerClock, reaperClock := testkit.NewClock(start), testkit.NewClock(start.Add(2*time.Millisecond))
	stores := pgProcesses(t, workerClock, reaperClock)
	worker, reaper := stores[0], stores[1]
	ctx := context.Background()
	const rounds, ttl = 40, time.Minute
	wins := map[string]int{}
	for round := range rounds {
		id := addTodos(t, worker, "inbox", 1)[0]
		td, err := worker.Claim(ctx, Ack{ID: id, Owner: "agent:w"}, ttl)
		if err != nil {
			t.Fatal(err)
		}
		// The worker's clock one millisecond before the lease's end, the reaper's
		// one after it.
		workerClock.Add(ttl - time.Millisecond)
		reaperClock.Add(ttl - time.Millisecond)
		var hbErr, reapErr error
		var reaped ReapResult
		race(func() {
			_, hbErr = worker.Heartbeat(ctx, Ack{ID: id, Owner: "agent:w", LeaseSeq: td.LeaseSeq}, ttl)
		}, func() {
			reaped, reapErr = reaper.ReapExpired(ctx)
		})
		if reapErr != nil {
			t.Fatalf("round %d: reap: %v", round, reapErr)
		}
		now, err := reaper.Todo(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case hbErr == nil && reaped.Requeued == 0 && now.State == StateClaimed && now.LeaseSeq == td.LeaseSeq &&
			now.LeaseExpiry.After(*td.LeaseExpiry):
			wins["heartbeat"]++
			// Let the lease lapse for good and reap it, ready for the next round.
			workerClock.Add(2 * ttl)
			reaperClock.Add(2 * ttl)
			if r, err := reaper.ReapExpired(ctx); err != nil || r.Requeued != 1 {
				t.Fatalf("round %d: reaping the lapsed lease: %+v, %v", round, r, err)
			}
		case errors.Is(hbErr, ErrConflict) && reaped.Requeued == 1 && now.State == StatePending && now.Owner == "":
			wins["reaper"]++
		default:
			t.Fatalf("round %d: heartbeat %v, reaper %+v, todo %s (owner %q, lease %d until %v): both won, or neither",
				round, hbErr, reaped, now.State, now.Owner, now.LeaseSeq, now.LeaseExpiry)
		}
		workerClock.Add(time.Second)
		reaperClock.Add(time.Second)
	}
	t.Logf("of %d races: %v", rounds, wins)
	countsAgree(t, worker)
}

// A worker completes its todo while an operator, in another process, releases
// it: the todo is done (and the release a conflict) or back on its queue (and
// the complete a conflict), never both.
func TestCompleteRacingAHumanRelease(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	stores := pgProcesses(t, clock, clock)
	worker, board := stores[0], stores[1]
	ctx := context.Background()
	const rounds = 40
	wins := map[string]int{}
	for round := range rounds {
		id := addTodos(t, worker, "inbox", 1)[0]
		td, err := worker.Claim(ctx, Ack{ID: id, Owner: "agent:w"}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		var doneErr, relErr error
		race(func() {
			_, doneErr = worker.Complete(ctx, Ack{ID: id, Owner: "agent:w", LeaseSeq: td.LeaseSeq}, "ok")
		}, func() {
			_, relErr = board.ReleaseByHuman(ctx, id, "human:1")
		})
		now, err := board.Todo(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case doneErr == nil && errors.Is(relErr, ErrConflict) && now.State == StateDone && now.Result == "ok":
			wins["complete"]++
		case relErr == nil && errors.Is(doneErr, ErrConflict) && now.State == StatePending && now.Owner == "" &&
			now.Result == "":
			wins["release"]++
		default:
			t.Fatalf("round %d: complete %v, release %v, todo %s (owner %q, result %q): both won, or neither",
				round, doneErr, relErr, now.State, now.Owner, now.Result)
		}
	}
	t.Logf("of %d races: %v", rounds, wins)
	countsAgree(t, worker)
}

// Two operators retry the same dead letters from two processes at once: each
// dead letter goes back once, so the two counts add up to them all.
func TestTwoRetriesOfTheSameDeadLetters(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	stores := pgProcesses(t, clock, clock)
	ctx := context.Background()
	const n = 2*retryChunk + 30
	if err := stores[0].SeedTodosForBench(ctx, "inbox", n, ""); err != nil {
		t.Fatal(err)
	}
	err := stores[0].write(ctx, func(w *wtx) error {
		_, err := w.exec(`UPDATE todos SET state = 'failed', attempts = 1, last_error = 'boom', finished_at = ?`, ms(w.now))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Second)
	var got [2]int
	var errs [2]error
	race(func() {
		got[0], errs[0] = stores[0].RetryFailed(ctx, Failed{Queue: "inbox"}, "human:1")
	}, func() {
		got[1], errs[1] = stores[1].RetryFailed(ctx, Failed{Queue: "inbox"}, "human:2")
	})
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("retries: %v, %v", errs[0], errs[1])
	}
	var audits int
	if err := stores[1].rdb.QueryRow(`SELECT count(*) FROM audit WHERE action = 'todo.retry'`).Scan(&audits); err != nil {
		t.Fatal(err)
	}
	if got[0]+got[1] != n || audits != n {
		t.Fatalf("retried %d and %d, %d audit rows; want %d dead letters retried once each", got[0], got[1], audits, n)
	}
	countsAgree(t, stores[0])
}
