package agent

import (
	"sync"
	"sync/atomic"
	"time"
)

// Activity is what an endpoint's agent is doing, as far as this process has seen
// since it started: what the board shows so that an operator sees an agent stop.
type Activity struct {
	Sessions    int       // live MCP sessions
	Listening   int       // of them, with a GET stream open for the doorbell
	LastRequest time.Time // its latest request, on any session; zero: none yet
}

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
	for _, x := range a.sessions.ofEndpoint(endpointID) {
		out.Sessions++
		if x.listening() {
			out.Listening++
		}
	}
	return out
}
