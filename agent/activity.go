package agent

import (
	"sync"
	"sync/atomic"
	"time"
)

// Activity is what an endpoint's agent is doing, as far as this process has seen
// since it started: what the board shows so that an operator sees an agent stop.
type Activity struct {
	Sessions    int       // MCP sessions not ended
	Listening   int       // of them, with a GET stream open for the doorbell
	Idle        int       // of them, with no stream open and no request for IdleAfter
	LastRequest time.Time // its latest request, on any session; zero: none yet
}

// IdleAfter is how long a session with no stream open may go without a request
// before Activity counts it idle rather than live: a client that went away
// without ending its session shows as such within a minute, not only once the
// idle sweep ends it (SessionIdleTTL, 30 minutes). Idle says no sign of life, not
// gone: a worker between two heartbeats of a long todo may count idle meanwhile.
const IdleAfter = time.Minute

// Live is how many of the sessions are in use: listening, or with a recent request.
func (a Activity) Live() int { return a.Sessions - a.Idle }

// lastSeen holds each endpoint's latest request (unix nanoseconds), kept past the
// end of its sessions.
type lastSeen struct{ m sync.Map } // endpoint id → *atomic.Int64

func (l *lastSeen) note(endpointID int64, now time.Time) {
	v, ok := l.m.Load(endpointID)
	if !ok {
		v, _ = l.m.LoadOrStore(endpointID, new(atomic.Int64))
	}
	v.(*atomic.Int64).Store(now.UnixNano())
}

func (l *lastSeen) get(endpointID int64) time.Time {
	if v, ok := l.m.Load(endpointID); ok {
		return time.Unix(0, v.(*atomic.Int64).Load())
	}
	return time.Time{}
}

// Activity reports endpoint endpointID's sessions and latest request.
func (a *Agent) Activity(endpointID int64) Activity {
	out := Activity{LastRequest: a.seen.get(endpointID)}
	now := a.opts.Now()
	for _, x := range a.sessions.ofEndpoint(endpointID) {
		out.Sessions++
		switch {
		case x.listening():
			out.Listening++
		case now.Sub(time.Unix(0, x.lastUsed.Load())) >= IdleAfter:
			out.Idle++
		}
	}
	return out
}
