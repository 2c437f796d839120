// Command testmodule is a small MCP stdio server that the modules tests build
// and supervise. Its tools let a test observe and provoke what the
// supervisor must handle: the environment it got, slow calls, grandchildren,
// crashes, garbage on stdout and a tool list that changes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// rawSchema carries keys mcp-go's typed schema would drop ($schema, x-*).
const rawSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"text":{"type":"string","x-sensitive":false}},"additionalProperties":false}`

func main() {
	grandchild := flag.Bool("grandchild", false, "sleep forever ignoring SIGTERM (started by spawn_grandchild)")
	stubborn := flag.Bool("stubborn", false, "ignore SIGTERM and keep running after stdin closes")
	descFile := flag.String("desc-file", "", "read the echo tool's description from this file")
	pageSize := flag.Int("page-size", 0, "tools/list page size (0: no paging)")
	flag.Parse()

	if *grandchild {
		signal.Ignore(syscall.SIGTERM)
		sleepForever()
	}
	if *stubborn {
		signal.Ignore(syscall.SIGTERM)
	}

	fmt.Fprintln(os.Stderr, "testmodule starting")
	opts := []server.ServerOption{server.WithToolCapabilities(true)}
	if *pageSize > 0 {
		opts = append(opts, server.WithPaginationLimit(*pageSize))
	}
	s := server.NewMCPServer("testmodule", "1.0.0", opts...)
	s.AddTool(echoTool(describe(*descFile)), echo)
	addTools(s)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if !*stubborn {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, syscall.SIGTERM)
		go func() {
			<-sig
			fmt.Fprintln(os.Stderr, "testmodule: SIGTERM")
			os.Exit(0)
		}()
	}
	err := server.NewStdioServer(s).Listen(ctx, frozenStdin, os.Stdout)
	fmt.Fprintln(os.Stderr, "testmodule: stdin closed:", err)
	if *stubborn {
		sleepForever()
	}
}

// frozenStdin is os.Stdin until freeze_stdin is called; from then on nothing more
// is read from it, as a wedged module would behave.
var (
	frozen      = make(chan struct{})
	freezeOnce  sync.Once
	frozenStdin io.Reader = freezable{}
)

type freezable struct{}

func (freezable) Read(p []byte) (int, error) {
	select {
	case <-frozen:
		sleepForever()
	default:
	}
	return os.Stdin.Read(p)
}

// sleepForever blocks without tripping the runtime's deadlock detector,
// which a bare select{} would.
func sleepForever() {
	for {
		time.Sleep(time.Hour)
	}
}

func describe(file string) string {
	if file == "" {
		return "Echo the text back."
	}
	b, err := os.ReadFile(file)
	if err != nil {
		fmt.Fprintln(os.Stderr, "read desc-file:", err)
		os.Exit(3)
	}
	return strings.TrimSpace(string(b))
}

func echoTool(desc string) mcp.Tool {
	t := mcp.NewToolWithRawSchema("echo", desc, json.RawMessage(rawSchema))
	t.Title = "Echo"
	t.Annotations = mcp.ToolAnnotation{ReadOnlyHint: mcp.ToBoolPtr(true), Title: "Echo text"}
	t.Meta = &mcp.Meta{AdditionalFields: map[string]any{"example.com/owner": "tests"}}
	return t
}

func echo(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	text := req.GetString("text", "")
	// "log:…" is also sent as an MCP log message, before the answer.
	if msg, ok := strings.CutPrefix(text, "log:"); ok {
		if err := server.ServerFromContext(ctx).SendNotificationToClient(ctx, "notifications/message",
			map[string]any{"level": "warning", "logger": "testmod", "data": msg}); err != nil {
			return nil, err
		}
	}
	return mcp.NewToolResultStructured(map[string]any{"text": text}, text), nil
}

func addTools(s *server.MCPServer) {
	prefix := os.Getenv("SWITCHBOARD_MODULE_NAME")
	s.AddTool(mcp.NewTool("get_env", mcp.WithDescription("Return the process environment (sorted) and working directory.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			env := os.Environ()
			sort.Strings(env)
			cwd, _ := os.Getwd()
			return mcp.NewToolResultStructured(map[string]any{"env": env, "cwd": cwd}, strings.Join(env, "\n")), nil
		})
	s.AddTool(mcp.NewTool("elicit", mcp.WithDescription("Ask the user a question through elicitation; report what came back.")),
		func(ctx context.Context, _ mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := s.RequestElicitation(ctx, mcp.ElicitationRequest{Params: mcp.ElicitationParams{Message: "Which one?",
				RequestedSchema: map[string]any{"type": "object", "properties": map[string]any{"pick": map[string]any{"type": "string"}}}}})
			if err != nil {
				return mcp.NewToolResultError("elicitation failed: " + err.Error()), nil
			}
			content, _ := json.Marshal(res.Content)
			return mcp.NewToolResultText(string(res.Action) + " " + string(content)), nil
		})
	s.AddTool(mcp.NewTool("sleep", mcp.WithDescription("Sleep for ms milliseconds or until cancelled."),
		mcp.WithNumber("ms", mcp.Required())),
		func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(time.Duration(req.GetFloat("ms", 0)) * time.Millisecond):
				return mcp.NewToolResultText("slept"), nil
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		})
	s.AddTool(mcp.NewTool("spawn_grandchild", mcp.WithDescription("Start a long-lived child process; return its pid.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			self, err := os.Executable()
			if err != nil {
				return nil, err
			}
			cmd := exec.Command(self, "-grandchild")
			if err := cmd.Start(); err != nil {
				return nil, err
			}
			return mcp.NewToolResultStructured(map[string]any{"pid": cmd.Process.Pid}, fmt.Sprint(cmd.Process.Pid)), nil
		})
	s.AddTool(mcp.NewTool("freeze_stdin", mcp.WithDescription("Answer, then never read stdin again.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			freezeOnce.Do(func() { close(frozen) })
			return mcp.NewToolResultText("frozen"), nil
		})
	s.AddTool(mcp.NewTool("crash", mcp.WithDescription("Exit at once with the given code."),
		mcp.WithNumber("code")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			code := int(req.GetFloat("code", 1))
			fmt.Fprintf(os.Stderr, "crashing with code %d\n", code)
			os.Exit(code)
			return nil, nil
		})
	s.AddTool(mcp.NewTool("emit_garbage", mcp.WithDescription("Write a non-JSON line to stdout.")),
		func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			fmt.Fprint(os.Stdout, "\nthis is not JSON-RPC\n")
			return mcp.NewToolResultText("done"), nil
		})
	s.AddTool(mcp.NewTool("add_tool", mcp.WithDescription("Add (or redefine) a tool; the server announces tools/list_changed."),
		mcp.WithString("name", mcp.Required()), mcp.WithString("description")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			name := req.GetString("name", "")
			desc := req.GetString("description", "added at runtime")
			if name == "echo" {
				s.AddTool(echoTool(desc), echo)
			} else {
				s.AddTool(mcp.NewTool(name, mcp.WithDescription(desc)),
					func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
						return mcp.NewToolResultText(name), nil
					})
			}
			return mcp.NewToolResultText("added " + name), nil
		})
	// A tool that already carries the capability prefix must not get it twice.
	if prefix != "" {
		s.AddTool(mcp.NewTool(prefix+"_status", mcp.WithDescription("Report ok."),
			mcp.WithReadOnlyHintAnnotation(true)),
			func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return mcp.NewToolResultText("ok"), nil
			})
	}
}
