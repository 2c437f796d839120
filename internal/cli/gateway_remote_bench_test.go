package cli

import (
	"context"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	mcpserver "github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// BenchmarkGatewayRemoteCall measures what the gateway adds to a remote
// capability's tool call: an MCP server's echo over Streamable HTTP on loopback,
// called through serve's /mcp (auth, policy, limits, the egress-checked
// connection, the audit row) against the same server called directly by an
// mcp-go client; one agent, and 8 at once. Run:
//
//	go test -run '^$' -bench BenchmarkGatewayRemoteCall -benchtime 2000x .
func BenchmarkGatewayRemoteCall(b *testing.B) {
	s := mcpserver.NewMCPServer("bench-remote", "1.0.0")
	s.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(req.GetString("text", "")), nil
	})
	upstream := httptest.NewServer(mcpserver.NewStreamableHTTPServer(s))
	b.Cleanup(upstream.Close)
	url := upstream.URL + "/mcp"
	manifest := fmt.Sprintf(`{"version":1,"type":"remote","name":"remote","title":"Remote","description":"Benchmark server.",
		"risk":"read","url":%q,"allow_private_network":true}`, url)
	via := func(b *testing.B, n int) []func(context.Context) error {
		return gatewayCallers(b, manifest, "remote", mcp.CallToolParams{Name: "remote_echo", Arguments: map[string]any{"text": "ping"}}, n)
	}
	direct := func(b *testing.B, n int) []func(context.Context) error {
		c, err := client.NewStreamableHttpClient(url)
		return directCallers(b, c, err, n)
	}
	for _, bc := range []struct {
		name   string
		setup  func(*testing.B, int) []func(context.Context) error
		agents int
	}{
		{"direct", direct, 1},
		{"gateway", via, 1},
		{"direct-8callers", direct, 8},
		{"gateway-8agents", via, 8},
	} {
		b.Run(bc.name, func(b *testing.B) { testkit.MeasureCalls(b, bc.setup(b, bc.agents)) })
	}
}
