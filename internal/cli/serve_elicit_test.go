package cli

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/internal/server"
)

// A module tool that asks for elicitation anyway is refused, under 2026-07-28 as
// under the session revisions: Switchboard relays no elicitation (its module
// client declares none), tells the module so in words an agent's author can act
// on, and the call does not hang.
func TestModuleElicitationRefusedUnderBothRevisions(t *testing.T) {
	_, manifests := testModuleDir(t)
	ms := startModuleServer(t, server.Config{ModulesDir: manifests})
	cred := ms.endpoint("asker", "--capabilities", "testmod")

	tr, err := transport.NewStreamableHTTP(ms.base+"/mcp", transport.WithHTTPHeaders(map[string]string{"Authorization": "Bearer " + cred}))
	if err != nil {
		t.Fatal(err)
	}
	modern := client.NewClient(tr)
	t.Cleanup(func() { modern.Close() })
	if err := modern.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	init, err := modern.Initialize(t.Context(), mcp.InitializeRequest{Params: mcp.InitializeParams{ClientInfo: mcp.Implementation{Name: "asker", Version: "1"}}})
	if err != nil || init.ProtocolVersion != mcp.ProtocolVersion20260728 {
		t.Fatalf("stateless client settled on %v: %v", init, err)
	}
	session := ms.dial(cred)
	for name, c := range map[string]interface {
		CallTool(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error)
	}{"2026-07-28": modern, "session": session} {
		res, err := c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "testmod_elicit"}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		text := ""
		for _, part := range res.Content {
			if tc, ok := part.(mcp.TextContent); ok {
				text += tc.Text
			}
		}
		if !res.IsError || !strings.Contains(text, "Switchboard does not relay elicitation") {
			t.Errorf("%s: isError %v, %q; want a tool error saying Switchboard does not relay elicitation", name, res.IsError, text)
		}
	}
}
