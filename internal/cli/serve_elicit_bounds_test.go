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
	_, manifests := testModuleDir(t)
	ms := startModuleServer(t, server.Config{ModulesDir: manifests})
	cred := ms.endpoint("owner", "--capabilities", "testmod")
	if first := statelessCall(t, ms, cred, nil); first.ResultType != mcp.ResultTypeInputRequired {
		t.Fatalf("first call: %+v; want input_required", first)
	}
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
	_, manifests := testModuleDir(t)
	ms := startModuleServer(t, server.Config{ModulesDir: manifests})
	cred := ms.endpoint("owner", "--capabilities", "testmod")
	first := statelessCall(t, ms, cred, map[string]any{"arguments": map[string]any{"a": 1, "b": "x"}})
	if first.ResultType != mcp.ResultTypeInputRequired {
		t.Fatalf("first call: %+v; want input_required", first)
	}
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
