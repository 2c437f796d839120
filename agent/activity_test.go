package agent

import (
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// An endpoint's activity counts its live sessions and those listening for the
// doorbell, and keeps its latest request after its sessions end.
func TestActivitySaysWhatAnAgentIsDoing(t *testing.T) {
	e := newEnv(t)
	ep, cred := e.endpoint("worker", []string{"inbox"}, nil)
	other, _ := e.endpoint("other", []string{"inbox"}, nil)
	if a := e.ag.Activity(ep.ID); a != (Activity{}) {
		t.Fatalf("before any request: %+v", a)
	}
	before := time.Now()
	polling := e.dial(cred, false)
	e.dial(cred, true)
	polling.ok(t, VerbListTodos, nil, nil)
	a := e.ag.Activity(ep.ID)
	if a.Sessions != 2 || a.Listening != 1 || a.LastRequest.Before(before) {
		t.Fatalf("two sessions, one listening: %+v (since %v)", a, before)
	}
	if a := e.ag.Activity(other.ID); a != (Activity{}) {
		t.Fatalf("another endpoint's activity: %+v", a)
	}
	last := a.LastRequest
	for _, x := range e.ag.sessions.ofEndpoint(ep.ID) {
		e.ag.sessions.remove(x.id)
	}
	if a := e.ag.Activity(ep.ID); a.Sessions != 0 || a.Listening != 0 || !a.LastRequest.Equal(last) {
		t.Fatalf("after its sessions ended: %+v, want no sessions and the last request %v", a, last)
	}
}

// A session with no stream open that has made no request for IdleAfter counts as
// idle, not live, until its next request; one listening for the doorbell never
// does. The clock is the agent's, so nothing here waits.
func TestActivityCountsIdleSessions(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *envConfig) { c.agent.Now = clock.Now })
	ep, cred := e.endpoint("worker", []string{"inbox"}, nil)
	polling, listening := e.dial(cred, false), e.dial(cred, true)
	e.waitAttached(listening.GetSessionId())
	check := func(when string, live, idle int) {
		t.Helper()
		a := e.ag.Activity(ep.ID)
		if a.Sessions != 2 || a.Listening != 1 || a.Idle != idle || a.Live() != live {
			t.Fatalf("%s: %+v (live %d), want %d live and %d idle", when, a, a.Live(), live, idle)
		}
	}
	check("just dialled", 2, 0)
	clock.Add(IdleAfter - time.Second)
	check("a second short of IdleAfter", 2, 0)
	clock.Add(time.Second)
	check("IdleAfter without a request", 1, 1)
	polling.ok(t, VerbListTodos, nil, nil)
	check("after a request", 2, 0)
	if last := e.ag.Activity(ep.ID).LastRequest; !last.Equal(clock.Now()) {
		t.Fatalf("last request at %v, want the agent's clock's %v", last, clock.Now())
	}
	clock.Add(10 * IdleAfter)
	check("long after", 1, 1)
}
