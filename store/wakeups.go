package store

import (
	"container/heap"
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"time"
)

// A todo failed with a retry goes back to pending at once but is claimable only
// when its backoff ends (available_at). Its doorbell must ring then, not when it
// failed: an agent rung at the failure finds nothing to claim, and one waiting on
// its doorbell would never hear of the todo again. The store keeps those
// wake-ups in memory and fires them on a timer; the reaper's pass catches up any
// the timer missed, and LoadBackoffs takes them up again after a restart.

// wakeup is a claimable change to announce at a time.
type wakeup struct {
	at time.Time
	c  TodoChange
}

type wakeupHeap []wakeup

func (h wakeupHeap) Len() int           { return len(h) }
func (h wakeupHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h wakeupHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *wakeupHeap) Push(x any)        { *h = append(*h, x.(wakeup)) }
func (h *wakeupHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = wakeup{}
	*h = old[:len(old)-1]
	return x
}

type wakeups struct {
	mu     sync.Mutex
	due    wakeupHeap
	latest map[int64]time.Time // each todo's current wake-up; older ones in due are stale
	timer  *time.Timer
	closed bool
}

// wakeAt announces c, as claimable, at at. A later wake-up for the same todo
// (it failed again) replaces this one.
func (s *Store) wakeAt(at time.Time, c TodoChange) {
	w := &s.wakeups
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	if w.latest == nil {
		w.latest = map[int64]time.Time{}
	}
	// A todo's backoffs only move later (it fails again after the last one ended),
	// so the latest time is its current one, whichever order they arrive in
	// (LoadBackoffs reads a snapshot while new failures come in).
	if cur, ok := w.latest[c.ID]; ok && cur.After(at) {
		return
	}
	w.latest[c.ID] = at
	heap.Push(&w.due, wakeup{at: at, c: c})
	if w.due[0].at.Equal(at) {
		s.armLocked()
	}
}

// armLocked sets the timer for the earliest wake-up.
func (s *Store) armLocked() {
	w := &s.wakeups
	if len(w.due) == 0 {
		return
	}
	d := max(w.due[0].at.Sub(s.now()), 0)
	if w.timer == nil {
		w.timer = time.AfterFunc(d, s.RingDue)
	} else {
		w.timer.Reset(d)
	}
}

// RingDue announces every wake-up whose time has come. The timer calls it; the
// reaper calls it on each pass too, so none waits past a pass if the timer and
// the store's clock disagree.
func (s *Store) RingDue() {
	w := &s.wakeups
	w.mu.Lock()
	var ready []TodoChange
	now := s.now()
	for len(w.due) > 0 && !w.due[0].at.After(now) {
		x := heap.Pop(&w.due).(wakeup)
		// A todo that failed again since has a later wake-up: this one is stale.
		if at, ok := w.latest[x.c.ID]; ok && at.Equal(x.at) {
			delete(w.latest, x.c.ID)
			ready = append(ready, x.c)
		}
	}
	if !w.closed {
		s.armLocked()
	}
	w.mu.Unlock()
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("store: a todo-change hook panicked on a backoff's doorbell",
				"panic", p, "stack", string(debug.Stack()))
		}
	}()
	s.fire(ready)
}

// LoadBackoffs takes up the wake-ups of the todos backing off in the database,
// which a restart (or another process) left untimed. serve calls it once at
// start. It reads the claim index whole (a million pending todos: 77 ms on the
// 2-core VM, BenchmarkLoadBackoffs), so it runs on a goroutine of its own.
func (s *Store) LoadBackoffs(ctx context.Context) (int, error) {
	rows, err := s.rdb.QueryContext(ctx, s.q(`SELECT id, queue, source_type, available_at FROM todos INDEXED BY todos_claimable
		WHERE state = 'pending' AND available_at > ?`), ms(s.now()))
	if err != nil {
		return 0, fmt.Errorf("store: load backoffs: %w", err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var c TodoChange
		var at int64
		if err := rows.Scan(&c.ID, &c.Queue, &c.Source, &at); err != nil {
			return n, fmt.Errorf("store: load backoffs: %w", err)
		}
		c.State, c.Claimable, c.Cause = StatePending, true, "backoff_over"
		s.wakeAt(fromMS(at), c)
		n++
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("store: load backoffs: %w", err)
	}
	return n, nil
}

// stopWakeups drops the pending wake-ups when the store closes.
func (s *Store) stopWakeups() {
	w := &s.wakeups
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.due, w.latest = nil, nil
	if w.timer != nil {
		w.timer.Stop()
	}
}
