package store

import (
	"context"
	"sync"
	"testing"
	"time"
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
		l.ch <- c
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
	clock := &manualClock{now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
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
