package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/store"
)

// A module call that no request waits for (its agent was asked a question and
// has not answered) is still audited before Wait returns: serve closes the
// store only after it.
func TestModulesWaitForRunsToBeAudited(t *testing.T) {
	observed, gate := make(chan struct{}), make(chan struct{})
	e := newModuleEnv(t, ModuleOptions{Observe: func(ModuleCall) { close(observed); <-gate }}, fakeTool("alpha", "alpha_slow"))
	ep, _ := e.endpoint("waiting", []string{"q"}, nil, grant([]string{"alpha"}, nil, nil))
	release := make(chan struct{})
	e.cat.handle = func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
		<-release
		return echoResult(ctx, tool, args)
	}
	tool, known := e.mods.lookup("alpha_slow")
	_, _, run := e.mods.call(context.Background(), ep, tool, known, mcp.CallToolRequest{}, time.Now())
	if run == nil {
		t.Fatal("the call was refused")
	}
	waited := make(chan error, 1)
	go func() { waited <- e.mods.Wait(context.Background()) }()
	close(release)
	<-observed // the run has audited and is reporting
	select {
	case err := <-waited:
		close(gate)
		t.Fatalf("Wait returned (%v) while a run had not ended", err)
	default:
	}
	close(gate)
	if err := <-waited; err != nil {
		t.Fatal(err)
	}
	rows, err := e.st.ListAudit(context.Background(), store.AuditFilter{Action: "module.call"})
	if err != nil || len(rows) != 1 || rows[0].Target != "alpha_slow" {
		t.Fatalf("audit rows %+v, %v; want the call's", rows, err)
	}
}

// A retry for a tool that has left the catalog since its module asked is told
// so (not_found), not that the tool is not granted.
func TestModuleRetryForAToolGoneSinceSaysSo(t *testing.T) {
	e := newModuleEnv(t, ModuleOptions{}, fakeTool("alpha", "alpha_ask"))
	ep, _ := e.endpoint("asker", []string{"q"}, nil, grant([]string{"alpha"}, nil, nil))
	started := make(chan struct{})
	e.cat.handle = func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	tool, known := e.mods.lookup("alpha_ask")
	_, _, run := e.mods.call(context.Background(), ep, tool, known, mcp.CallToolRequest{}, time.Now())
	<-started
	state, _ := e.mods.waiting.add(run, elicitAsk{answer: make(chan elicitReply, 1)}, 4)
	e.cat.mu.Lock()
	e.cat.tools = nil
	e.cat.mu.Unlock()
	var req mcp.CallToolRequest
	if err := json.Unmarshal([]byte(`{"name":"alpha_ask","requestState":"`+state+`","inputResponses":{"elicitation":{"action":"accept"}}}`), &req.Params); err != nil {
		t.Fatal(err)
	}
	res := e.mods.resume(context.Background(), ep, "alpha_ask", req)
	if got := text(res); !strings.HasPrefix(got, CodeNotFound+":") {
		t.Errorf("retry for a tool gone: %s; want not_found", got)
	}
}
