package modules

import (
	"context"
	"errors"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// errNoElicitation is what a module that asks for elicitation is told. Its
// client declares no elicitation capability, so a module that follows the spec
// never asks; one that asks anyway gets these words to pass on to the agent,
// rather than mcp-go's "no elicitation handler configured".
var errNoElicitation = errors.New("Switchboard does not relay elicitation to agents (under any MCP revision, 2026-07-28 " +
	"included) and declared no elicitation capability: the tool must work without asking, for example by taking the " +
	"answer as an argument")

// noElicitation is a module's stdio transport whose requests to Switchboard
// are answered as before, except elicitation/create, refused with
// errNoElicitation.
type noElicitation struct{ *transport.Stdio }

func (t noElicitation) SetRequestHandler(h transport.RequestHandler) {
	t.Stdio.SetRequestHandler(func(ctx context.Context, req transport.JSONRPCRequest) (*transport.JSONRPCResponse, error) {
		if req.Method == string(mcp.MethodElicitationCreate) {
			return nil, errNoElicitation
		}
		return h(ctx, req)
	})
}
