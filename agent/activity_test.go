package agent

import (
	"testing"
	"time"
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
