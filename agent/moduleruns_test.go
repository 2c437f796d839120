package agent

import (
	"context"
	"encoding/json"
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
