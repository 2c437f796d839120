package agent

import (
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/switchboardhq/switchboard/store"
)

// limiters holds one token bucket per endpoint. An endpoint's own rate and burst
// win over the server default, and an edit to them applies on the next call.
// The server default does not apply to the queue verbs (see allow).
// Buckets run on wall time, not the store's clock: a rate is about load on this
// machine, not about lease arithmetic.
type limiters struct {
	perSecond float64
	burst     int

	mu sync.Mutex
	m  map[int64]*rate.Limiter
}

func newLimiters(perSecond float64, burst int) *limiters {
	return &limiters{perSecond: perSecond, burst: burst, m: map[int64]*rate.Limiter{}}
}

// allow takes one token from ep's bucket, or reports that there is none and how
// long until there is one (-1 when the wait is too long to say). A queue verb
// takes none unless the endpoint sets a rate or burst of its own: the default is
// against calls that cost (module tools, webhook management), and an honest
// fleet of workers on one endpoint makes thousands of queue calls a second (two
// per todo), which the store's own pace bounds. An operator who set a rate meant
// the whole endpoint, so then every call counts.
func (l *limiters) allow(ep store.Endpoint, queueVerb bool) (bool, time.Duration) {
	r, b := ep.RatePerSecond, ep.RateBurst
	if queueVerb && r <= 0 && b <= 0 {
		return true, 0
	}
	if r <= 0 {
		r = l.perSecond
	}
	if b <= 0 {
		b = l.burst
	}
	l.mu.Lock()
	lim := l.m[ep.ID]
	if lim == nil {
		lim = rate.NewLimiter(rate.Limit(r), b)
		l.m[ep.ID] = lim
	} else {
		if lim.Limit() != rate.Limit(r) {
			lim.SetLimit(rate.Limit(r))
		}
		if lim.Burst() != b {
			lim.SetBurst(b)
		}
	}
	l.mu.Unlock()
	if lim.Allow() {
		return true, 0
	}
	// A reservation says when the next token comes; cancelled, it takes nothing.
	res := lim.Reserve()
	defer res.Cancel()
	if !res.OK() {
		return false, -1
	}
	return false, res.Delay()
}

// rateLimitedError tells an agent over its rate limit when to call again.
func rateLimitedError(wait time.Duration) *Error {
	if wait < 0 || wait > time.Hour {
		return errorf(CodeRateLimited, "this endpoint is over its rate limit; retry later")
	}
	return errorf(CodeRateLimited, "this endpoint is over its rate limit; retry in %.2f s", max(wait.Seconds(), 0.01))
}
