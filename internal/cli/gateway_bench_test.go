package cli

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/internal/mcpclient"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// BenchmarkGatewayModuleCall measures what the gateway adds to a module tool call:
// the test module's echo called through serve's /mcp (auth, policy, rate and
// concurrency limits, forwarding, the audit row under synchronous FULL) against
// the same module called directly over stdio by an mcp-go client; one agent, and
// 8 agents (8 endpoints, 8 sessions) at once. Run:
//
//	go test -run '^$' -bench BenchmarkGatewayModuleCall -benchtime 2000x .
//
// SWITCHBOARD_BENCH_SYNC=NORMAL runs serve with synchronous NORMAL.
func BenchmarkGatewayModuleCall(b *testing.B) {
	dir := b.TempDir()
	bin := filepath.Join(dir, "testmodule")
	build := exec.Command("go", "build", "-o", bin, "../../modules/testdata/testmodule")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		b.Fatalf("build test module: %v\n%s", err, out)
	}
	os.Chmod(bin, 0o755)
	b.Setenv("TESTMOD_TOKEN", "bench")

	for _, bc := range []struct {
		name   string
		setup  func(*testing.B, string, int) []func(context.Context) error
		agents int
	}{
		{"direct", direct, 1},
		{"gateway", viaGateway, 1},
		{"direct-8callers", direct, 8},
		{"gateway-8agents", viaGateway, 8},
	} {
		b.Run(bc.name, func(b *testing.B) {
			testkit.MeasureCalls(b, bc.setup(b, bin, bc.agents))
		})
	}
}

// direct is one stdio MCP session with the module, shared by n callers.
func direct(b *testing.B, bin string, n int) []func(context.Context) error {
	c, err := client.NewStdioMCPClient(bin, []string{"SWITCHBOARD_MODULE_NAME=testmod", "TESTMOD_TOKEN=bench"})
	return directCallers(b, c, err, n)
}

// directCallers initializes c, an MCP client of the server itself, and returns n
// callers of its echo sharing it.
func directCallers(b *testing.B, c *client.Client, err error, n int) []func(context.Context) error {
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	init := mcp.InitializeRequest{}
	init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	init.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
	if _, err := c.Initialize(context.Background(), init); err != nil {
		b.Fatal(err)
	}
	req := mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "ping"}}}
	call := func(ctx context.Context) error { return checkCall(c.CallTool(ctx, req)) }
	return slices.Repeat([]func(context.Context) error{call}, n)
}

// viaGateway is serve with the module, and n agents, each with its own endpoint
// and session.
func viaGateway(b *testing.B, bin string, n int) []func(context.Context) error {
	return gatewayCallers(b, fmt.Sprintf(`{"version":1,"type":"module","name":"testmod",
		"title":"Test module","description":"Benchmark module.","risk":"read","command":%q,"environment":["TESTMOD_TOKEN"]}`, bin),
		"testmod", mcp.CallToolParams{Name: "testmod_echo", Arguments: map[string]any{"text": "ping"}}, n)
}

// gatewayCallers is serve with the capability of manifest, and n agents, each
// with its own endpoint and session, calling call.
func gatewayCallers(b *testing.B, manifest, capability string, call mcp.CallToolParams, n int) []func(context.Context) error {
	manifests := filepath.Join(b.TempDir(), "manifests")
	os.Mkdir(manifests, 0o755)
	os.WriteFile(filepath.Join(manifests, capability+".json"), []byte(manifest), 0o644)
	mode := store.SyncFull
	if os.Getenv("SWITCHBOARD_BENCH_SYNC") == store.SyncNormal {
		mode = store.SyncNormal
	}
	cfg := server.Config{DB: filepath.Join(b.TempDir(), "sb.db"), ModulesDir: manifests, Synchronous: mode,
		ReaperInterval: time.Minute, Retention: time.Hour, ShutdownTimeout: 5 * time.Second, ModuleConcurrency: 64}
	ctx, cancel := context.WithCancel(context.Background())
	cfg.Logger = slog.New(slog.DiscardHandler)
	srv, err := server.New(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx, ln) }()
	b.Cleanup(func() { cancel(); <-done })

	// The benchmark measures the gateway, not the per-endpoint rate limit.
	rate, burst, caps := 1e6, 1_000_000, []string{capability}
	calls := make([]func(context.Context) error, n)
	for i := range calls {
		_, cred, err := srv.Store().CreateEndpoint(ctx, fmt.Sprintf("bench-%d", i), store.EndpointSpec{
			Capabilities: &caps, RatePerSecond: &rate, RateBurst: &burst}, "human:bench")
		if err != nil {
			b.Fatal(err)
		}
		c, _, err := mcpclient.Dial(ctx, "http://"+ln.Addr().String()+"/mcp", cred, mcpclient.DialOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		req := mcp.CallToolRequest{Params: call}
		calls[i] = func(ctx context.Context) error { return checkCall(c.CallTool(ctx, req)) }
	}
	return calls
}

func checkCall(res *mcp.CallToolResult, err error) error {
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("tool error: %+v", res.Content)
	}
	return nil
}
