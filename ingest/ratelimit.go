package ingest

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// failureLimiter rations the answers given to requests that failed verification,
// one token bucket per webhook. It is consulted only after a request has failed,
// so a valid delivery never spends a token and is never refused: a flood of forged
// requests is answered 429 cheaply while the producer's real deliveries go through.
// Requests for unknown tokens spend nothing: their bodies are never read, and
// their log line is rationed on its own (Receiver.unknown).
type failureLimiter struct {
	limit rate.Limit
	burst int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[int64]*rate.Limiter
}

// maxBuckets bounds the map; past it, buckets that have refilled (and so carry no
// state worth keeping) are dropped.
const maxBuckets = 4096

func newFailureLimiter(perSecond float64, burst int, now func() time.Time) *failureLimiter {
	return &failureLimiter{limit: rate.Limit(perSecond), burst: burst, now: now, buckets: map[int64]*rate.Limiter{}}
}

// allow spends one token of the webhook's bucket and reports whether there was one.
func (l *failureLimiter) allow(webhookID int64) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[webhookID]
	if !ok {
		if len(l.buckets) >= maxBuckets {
			l.sweep(now)
		}
		b = rate.NewLimiter(l.limit, l.burst)
		l.buckets[webhookID] = b
	}
	return b.AllowN(now, 1)
}

func (l *failureLimiter) sweep(now time.Time) {
	for id, b := range l.buckets {
		if b.TokensAt(now) >= float64(l.burst) {
			delete(l.buckets, id)
		}
	}
}
