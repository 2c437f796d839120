// Package logevery keeps an event that can repeat without end (a module that
// floods, a credential that loops) from writing a log line or an audit row each
// time: the first occurrence per key is reported at once, then at most one report
// per interval, carrying the count since the last.
package logevery

import (
	"sync"
	"time"
)

// Counter counts occurrences per key. Every is the least time between two
// reports of one key. The zero value reports every occurrence.
type Counter[K comparable] struct {
	Every time.Duration

	mu     sync.Mutex
	last   map[K]time.Time
	unsaid map[K]int
}

// Note counts an occurrence of key at now and returns how many occurrences to
// report now, this one included; 0 means not yet.
func (c *Counter[K]) Note(key K, now time.Time) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil {
		c.last, c.unsaid = map[K]time.Time{}, map[K]int{}
	}
	c.unsaid[key]++
	if last, ok := c.last[key]; ok && now.Sub(last) < c.Every {
		return 0
	}
	n := c.unsaid[key]
	c.last[key], c.unsaid[key] = now, 0
	return n
}

// Reset forgets key: its next occurrence is reported at once.
func (c *Counter[K]) Reset(key K) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, key)
	delete(c.unsaid, key)
}
