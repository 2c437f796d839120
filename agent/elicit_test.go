package agent

import (
	"errors"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// Pending runs are found only by their endpoint and tool, are capped per
// endpoint, and are gone (their question closed) once their run ends.
func TestPendingRunsBoundToEndpoint(t *testing.T) {
	var p pendingRuns
	newRun := func(ep int64) (*moduleRun, elicitAsk) {
		return &moduleRun{endpointID: ep, tool: "mod_ask"}, elicitAsk{params: mcp.ElicitationParams{Message: "?"}, answer: make(chan elicitReply, 1)}
	}
	addRun := func(ep int64) bool {
		r, a := newRun(ep)
		_, ok := p.add(r, a, 2)
		return ok
	}
	run, ask := newRun(1)
	state, ok := p.add(run, ask, 2)
	if !ok || state == "" {
		t.Fatal("first pending run refused")
	}
	if _, err := p.take(state, 2, "mod_ask", nil); err == nil {
		t.Error("another endpoint took the run")
	}
	if _, err := p.take(state, 1, "mod_other", nil); err == nil {
		t.Error("a call of another tool took the run")
	}
	if !addRun(1) {
		t.Fatal("second pending run refused under a cap of 2")
	}
	if addRun(1) {
		t.Error("third pending run of one endpoint accepted under a cap of 2")
	}
	if !addRun(2) {
		t.Error("another endpoint's run refused: the cap is per endpoint")
	}
	p.drop(run)
	if _, err := p.take(state, 1, "mod_ask", nil); err == nil {
		t.Error("a dropped run was taken")
	}
	if _, open := <-ask.answer; open {
		t.Error("a dropped run's question is still open")
	}
	if !addRun(1) {
		t.Error("dropping a run did not free its place under the cap")
	}
}

// A pending run is answered only by a retry with its call's arguments, however
// written; one with others leaves it waiting.
func TestPendingRunsBoundToArguments(t *testing.T) {
	var p pendingRuns
	run := &moduleRun{endpointID: 1, tool: "mod_ask", args: []byte(`{"a":1,"b":["x"]}`)}
	state, _ := p.add(run, elicitAsk{answer: make(chan elicitReply, 1)}, 4)
	for _, other := range []string{`{"a":2,"b":["x"]}`, `{}`, ``, `{"a":1}`, `{"a":1,"b":["x"],"c":null}`} {
		if _, err := p.take(state, 1, "mod_ask", []byte(other)); !errors.Is(err, errOtherArguments) {
			t.Errorf("retry with %q: %v; want errOtherArguments", other, err)
		}
	}
	if _, err := p.take(state, 1, "mod_ask", []byte(` { "b" : [ "x" ], "a" : 1.0 } `)); err != nil {
		t.Errorf("retry with the same arguments rewritten: %v", err)
	}
	if !sameArguments(nil, []byte(`{}`)) || !sameArguments([]byte(`null`), nil) {
		t.Error("no arguments and {} differ")
	}
}
