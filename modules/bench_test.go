package modules

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"testing"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// BenchmarkModuleCall measures what the gateway adds to a module tool call:
// the same echo call through Supervisor.Call and through a plain mcp-go
// stdio client talking to its own copy of the test module, one caller and
// 8 concurrent callers. Run:
//
//	go test -run '^$' -bench BenchmarkModuleCall -benchtime 2000x ./modules/
func BenchmarkModuleCall(b *testing.B) {
	args := json.RawMessage(`{"text":"ping"}`)
	gateway := func(b *testing.B) func(context.Context) error {
		sup := New(Options{
			Manifests: []Manifest{testManifest("testmod")},
			LookupEnv: testLookup,
			Logger:    slog.New(slog.DiscardHandler),
		})
		if err := sup.Start(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = sup.Close(context.Background()) })
		return func(ctx context.Context) error {
			_, err := sup.Call(ctx, "testmod_echo", args)
			return err
		}
	}
	direct := func(b *testing.B) func(context.Context) error {
		tr := transport.NewStdio(testModuleBin, []string{"SWITCHBOARD_MODULE_NAME=testmod"})
		c := client.NewClient(tr, client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION))
		ctx := context.Background()
		if err := c.Start(ctx); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close() })
		init := mcp.InitializeRequest{}
		init.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
		init.Params.ClientInfo = mcp.Implementation{Name: "bench", Version: "1"}
		if _, err := c.Initialize(ctx, init); err != nil {
			b.Fatal(err)
		}
		req := mcp.CallToolRequest{}
		req.Params.Name = "echo"
		req.Params.Arguments = map[string]any{"text": "ping"}
		return func(ctx context.Context) error {
			_, err := c.CallTool(ctx, req)
			return err
		}
	}
	for _, bc := range []struct {
		name    string
		setup   func(*testing.B) func(context.Context) error
		callers int
	}{
		{"direct", direct, 1},
		{"gateway", gateway, 1},
		{"direct-8callers", direct, 8},
		{"gateway-8callers", gateway, 8},
	} {
		b.Run(bc.name, func(b *testing.B) {
			call := bc.setup(b)
			testkit.MeasureCalls(b, slices.Repeat([]func(context.Context) error{call}, bc.callers))
		})
	}
}
