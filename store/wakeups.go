package store

import (
	"container/heap"
	"sync"
	"time"
)

// A todo failed with a retry goes back to pending at once but is claimable only
// when its backoff ends (available_at). Its doorbell must ring then, not when it
// failed: an agent rung at the failure finds nothing to claim, and one waiting on
// its doorbell would never hear of the todo again. The store keeps those
// wake-ups in memory and fires them on a timer; the reaper's pass catches up any
// the timer missed. A restart forgets them: agents claim on (re)connecting.

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
	*h = old[:len(old)-1]
	return x
}

type wakeups struct {
	mu     sync.Mutex
	due    wakeupHeap
	timer  *time.Timer
	closed bool
}

// wakeAt announces c, as claimable, at at.
func (s *Store) wakeAt(at time.Time, c TodoChange) {
	w := &s.wakeups
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
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
		ready = append(ready, heap.Pop(&w.due).(wakeup).c)
	}
	if !w.closed {
		s.armLocked()
	}
	w.mu.Unlock()
	s.fire(ready)
}

// stopWakeups drops the pending wake-ups when the store closes.
func (s *Store) stopWakeups() {
	w := &s.wakeups
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.due = nil
	if w.timer != nil {
		w.timer.Stop()
	}
}
