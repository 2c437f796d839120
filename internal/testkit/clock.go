package testkit

import (
	"sync"
	"time"
)

// Clock is the injected Now of the code under test: time moves only when the
// test says, so lease, throttle and retention tests need no sleeps.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock that reads start until the test advances it.
func NewClock(start time.Time) *Clock { return &Clock{t: start} }

func (c *Clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }

// Add moves the clock forward by d (backward when d is negative).
func (c *Clock) Add(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }
