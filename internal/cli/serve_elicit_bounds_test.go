package cli

import (
	"encoding/json"
	"strings"

	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/internal/server"
)

// A call left waiting for its agent's answer when serve stops is still audited:
// its run ends with the modules, and the store closes after it.
func TestModuleElicitationAuditedOnShutdown(t *testing.T) {
	ms, _, _ := waitingCall(t, nil)
	ms.stop()
	rows := ms.audits("module.call")
	if len(rows) != 1 || rows[0].Target != "testmod_elicit" {
		t.Fatalf("module.call audit rows after shutdown: %+v; want the waiting call's", rows)
	}
}

// A retry is the call it answers: one that carries other arguments than the
// call the module is asking about is refused, and the question still waits for
// the real retry (the same arguments, however written).
func TestModuleElicitationRetryKeepsArguments(t *testing.T) {
	ms, cred, first := waitingCall(t, map[string]any{"arguments": map[string]any{"a": 1, "b": "x"}})
	answer := map[string]any{"elicitation": map[string]any{"action": "accept", "content": map[string]any{"pick": "b"}}}
	for name, args := range map[string]any{"other arguments": map[string]any{"a": 2, "b": "x"}, "no arguments": nil} {
		retry := map[string]any{"inputResponses": answer, "requestState": first.RequestState, "arguments": args}
		if res := statelessCall(t, ms, cred, retry); !res.IsError || !strings.HasPrefix(toolText(res), "invalid_argument:") {
			t.Errorf("retry with %s: isError %v, %s; want invalid_argument", name, res.IsError, toolText(res))
		}
	}
	retry := map[string]any{"inputResponses": answer, "requestState": first.RequestState,
		"arguments": json.RawMessage(`{ "b" : "x", "a" : 1.0e0 }`)}
	if res := statelessCall(t, ms, cred, retry); res.IsError || toolText(res) != picked {
		t.Errorf("retry with the same arguments: isError %v, %s; want %q", res.IsError, toolText(res), picked)
	}
}

// A retry refused (another credential's requestState, a made-up one) is
// audited like any refused call, under the credential that tried: probing for
// others' pending calls leaves a trace.
func TestModuleElicitationRefusedRetriesAudited(t *testing.T) {
	ms, _, first := waitingCall(t, nil)
	prober := ms.endpoint("prober", "--capabilities", "testmod")
	answer := map[string]any{"elicitation": map[string]any{"action": "accept", "content": map[string]any{"pick": "b"}}}
	for _, state := range []string{first.RequestState, "guessed"} {
		if res := statelessCall(t, ms, prober, map[string]any{"inputResponses": answer, "requestState": state}); !res.IsError {
			t.Fatalf("the prober's retry was answered: %s", toolText(res))
		}
	}
	var probes []string
	for _, r := range ms.audits("module.call") {
		if r.Actor == "agent:prober" && r.Target == "testmod_elicit" {
			probes = append(probes, r.Outcome)
		}
	}
	if len(probes) != 2 || probes[0] != "not_found" || probes[1] != "not_found" {
		t.Errorf("the prober's refused retries were audited as %q; want two not_found rows", probes)
	}
}

// waitingCall starts serve with the test module and an endpoint "owner" granted
// it, and makes a 2026-07-28 call of testmod_elicit (with extra params) that
// the module's question leaves waiting for its answer.
func waitingCall(t *testing.T, extra map[string]any) (ms *moduleServer, cred string, first *mcp.CallToolResult) {
	t.Helper()
	_, manifests := testModuleDir(t)
	ms = startModuleServer(t, server.Config{ModulesDir: manifests})
	cred = ms.endpoint("owner", "--capabilities", "testmod")
	if first = statelessCall(t, ms, cred, extra); first.ResultType != mcp.ResultTypeInputRequired || first.RequestState == "" {
		t.Fatalf("first call: %+v; want input_required with a requestState", first)
	}
	return ms, cred, first
}
