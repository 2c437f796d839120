package store

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// changeLog records the todo changes a store announces.
type changeLog struct {
	mu   sync.Mutex
	list []TodoChange
	at   []time.Time
	ch   chan TodoChange
}

func watchChanges(s *Store) *changeLog {
	l := &changeLog{ch: make(chan TodoChange, 64)}
	s.OnTodoChange(func(c TodoChange) {
		l.mu.Lock()
		l.list, l.at = append(l.list, c), append(l.at, time.Now())
		l.mu.Unlock()
		select { // hooks must never block
		case l.ch <- c:
		default:
		}
	})
	return l
}

// claimable lists the changes that announced todo id as claimable.
func (l *changeLog) claimable(id int64) []TodoChange {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []TodoChange
	for _, c := range l.list {
		if c.ID == id && c.Claimable {
			out = append(out, c)
		}
	}
	return out
}

// failOnce adds a todo, claims it and fails it with a retry.
func failOnce(t *testing.T, s *Store) Todo {
	t.Helper()
	ctx := context.Background()
	added, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "p"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, ok, err := s.ClaimNext(ctx, "agent:a", []string{"inbox"}, time.Minute)
	if err != nil || !ok || claimed.ID != added.ID {
		t.Fatalf("claim: %v %v %+v", ok, err, claimed)
	}
	failed, err := s.Fail(ctx, Ack{ID: claimed.ID, Owner: "agent:a", LeaseSeq: claimed.LeaseSeq}, "transient", true)
	if err != nil || failed.State != StatePending {
		t.Fatalf("fail: %v %+v", err, failed)
	}
	return failed
}

// A todo failed with a retry is announced claimable when its backoff ends, not
// when it fails: an agent rung at the failure would find nothing to claim, and one
// waiting on its doorbell would never hear of the todo again.
func TestRetriedTodoRingsWhenItsBackoffEnds(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	log := watchChanges(s)
	failed := failOnce(t, s)
	if got := log.claimable(failed.ID); len(got) != 1 || got[0].Cause != "add" {
		t.Fatalf("claimable announcements after the failure: %+v, want only the add", got)
	}
	s.RingDue()
	if got := log.claimable(failed.ID); len(got) != 1 {
		t.Fatalf("announced claimable during its backoff: %+v", got)
	}
	clock.Add(RetryBackoff(1))
	s.RingDue()
	got := log.claimable(failed.ID)
	if len(got) != 2 || got[1].Cause != "backoff_over" || got[1].Queue != "inbox" || got[1].State != StatePending {
		t.Fatalf("claimable announcements after the backoff: %+v", got)
	}
	if _, ok, err := s.ClaimNext(context.Background(), "agent:b", []string{"inbox"}, time.Minute); err != nil || !ok {
		t.Fatalf("the rung todo could not be claimed: %v %v", ok, err)
	}
	s.RingDue()
	if got := log.claimable(failed.ID); len(got) != 2 {
		t.Fatalf("the backoff rang twice: %+v", got)
	}
}

// On the real clock the store's own timer rings, at the end of the backoff.
func TestBackoffTimerRings(t *testing.T) {
	s := openTest(t, Options{})
	log := watchChanges(s)
	failed := failOnce(t, s)
	deadline := time.After(RetryBackoff(1) + 10*time.Second)
	for {
		select {
		case c := <-log.ch:
			if c.ID != failed.ID || c.Cause != "backoff_over" {
				continue
			}
			log.mu.Lock()
			rang := log.at[len(log.at)-1]
			log.mu.Unlock()
			if rang.Before(failed.AvailableAt) {
				t.Fatalf("rang at %s, before the backoff ended at %s", rang, failed.AvailableAt)
			}
			return
		case <-deadline:
			t.Fatal("no doorbell when the backoff ended")
		}
	}
}

// A wake-up left from an earlier backoff (the timer was late, and the todo was
// claimed and failed again meanwhile) does not ring: the todo is backing off
// again. Its current backoff rings once, when it ends.
func TestStaleWakeupDoesNotRing(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	log := watchChanges(s)
	ctx := context.Background()
	failed := failOnce(t, s)
	clock.Add(RetryBackoff(1))
	// Before the first wake-up is run: claimed and failed again.
	again, ok, err := s.ClaimNext(ctx, "agent:a", []string{"inbox"}, time.Minute)
	if err != nil || !ok || again.ID != failed.ID {
		t.Fatalf("claim again: %v %v", ok, err)
	}
	if _, err := s.Fail(ctx, Ack{ID: again.ID, Owner: "agent:a", LeaseSeq: again.LeaseSeq}, "again", true); err != nil {
		t.Fatal(err)
	}
	s.RingDue()
	if got := log.claimable(failed.ID); len(got) != 1 {
		t.Fatalf("a stale wake-up rang during the second backoff: %+v", got)
	}
	clock.Add(RetryBackoff(2))
	s.RingDue()
	if got := log.claimable(failed.ID); len(got) != 2 || got[1].Cause != "backoff_over" {
		t.Fatalf("after the second backoff: %+v", got)
	}
}

// A restart forgets the timers; LoadBackoffs takes them up from the database.
func TestBackoffsSurviveARestart(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), "sb.db")
	opts := Options{Now: clock.Now, Logger: slog.New(slog.DiscardHandler)}
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	failed := failOnce(t, s)
	s.Close()

	s, err = Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	log := watchChanges(s)
	if n, err := s.LoadBackoffs(context.Background()); err != nil || n != 1 {
		t.Fatalf("LoadBackoffs = %d, %v; want the one todo backing off", n, err)
	}
	clock.Add(RetryBackoff(1))
	s.RingDue()
	if got := log.claimable(failed.ID); len(got) != 1 || got[0].Cause != "backoff_over" || got[0].Queue != "inbox" || got[0].Source != "manual" {
		t.Fatalf("after the restart and the backoff: %+v", got)
	}
}

// LoadBackoffs reads the claim index whole at start-up: its cost at a deep queue.
func BenchmarkLoadBackoffs(b *testing.B) {
	if testing.Short() {
		b.Skip("seeds a million todos")
	}
	s := openTest(b, Options{})
	ctx := context.Background()
	if err := s.SeedTodosForBench(ctx, "inbox", 1_000_000, `{"n":1}`); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		if _, err := s.LoadBackoffs(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// A backoff set by another process is timed by this one's watch too: it rings
// here when it ends, though the process that set it is gone by then.
func TestAnotherProcesssBackoffRingsHereWhenItEnds(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	db := testkit.DB(t)
	var serveSide, other *Store
	for _, s := range []**Store{&serveSide, &other} {
		st, err := Open(ctx, db, Options{Now: clock.Now, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		*s = st
	}
	log := watchChanges(serveSide)
	watch := watchOn(t, serveSide)
	failed := failOnce(t, other)
	other.Close()
	watch.check(ctx)
	serveSide.RingDue()
	// The add is announced, not as claimable: the scan finds the todo backing off.
	if got := log.claimable(failed.ID); len(got) != 0 {
		t.Fatalf("during the backoff: %+v, want nothing claimable", got)
	}
	clock.Add(RetryBackoff(1))
	serveSide.RingDue()
	if got := log.claimable(failed.ID); len(got) != 1 || got[0].Cause != "backoff_over" {
		t.Fatalf("after the backoff: %+v, want backoff_over once", got)
	}
}
