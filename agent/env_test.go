package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchboardhq/switchboard/internal/mcpclient"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/internal/testkit/teststore"
	"github.com/switchboardhq/switchboard/store"
)

// env is one Switchboard /mcp endpoint over real HTTP on a real SQLite file.
type env struct {
	t     testing.TB
	clock *testkit.Clock
	st    *store.Store
	ag    *Agent
	srv   *httptest.Server
	url   string
	quiet *slog.Logger

	attachMu sync.Mutex
	attached map[string]chan struct{} // session id → closed when its GET stream attaches

	run func() // starts the agent's Run (newEnv does, unless runLater)
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// envConfig is what a test may change about its env.
type envConfig struct {
	agent    Options
	sync     string // store.SyncNormal unless set: tests need no power-loss safety
	runLater bool   // Run starts when the test calls env.run, not in newEnv
}

func newEnv(t testing.TB, tweak ...func(*envConfig)) *env {
	t.Helper()
	e := &env{t: t, clock: testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)), quiet: quietLogger(),
		attached: map[string]chan struct{}{}}
	// Tests make calls in bursts; the rate limit has its own test.
	cfg := envConfig{agent: Options{Logger: e.quiet, RatePerSecond: 1e6, RateBurst: 1e6}, sync: store.SyncNormal}
	for _, f := range tweak {
		f(&cfg)
	}
	ctx := context.Background()
	st := teststore.Open(t, store.Options{Now: e.clock.Now, Synchronous: cfg.sync})
	e.st = st
	ag, err := New(st, cfg.agent)
	if err != nil {
		t.Fatal(err)
	}
	ag.onAttach = e.noteAttach
	e.ag = ag
	router := httprouter.New()
	ag.Mount(router, "/mcp")
	e.srv = httptest.NewServer(router)
	t.Cleanup(e.srv.Close)
	e.url = e.srv.URL + "/mcp"
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var once sync.Once
	e.run = func() { once.Do(func() { go func() { ag.Run(runCtx); close(done) }() }) }
	if !cfg.runLater {
		e.run()
	}
	// Cleanups run last-registered first: end the streams, then stop Run, then
	// the HTTP server (which waits for handlers) and the store.
	t.Cleanup(func() {
		cancel()
		e.run() // a Run never started ends at once
		<-done
	})
	t.Cleanup(ag.CloseSessions)
	return e
}

func (e *env) attachCh(id string) chan struct{} {
	e.attachMu.Lock()
	defer e.attachMu.Unlock()
	ch := e.attached[id]
	if ch == nil {
		ch = make(chan struct{})
		e.attached[id] = ch
	}
	return ch
}

func (e *env) noteAttach(id string) {
	ch := e.attachCh(id)
	select {
	case <-ch:
	default:
		close(ch)
	}
}

// waitAttached blocks until the session's GET stream is attached (or fails the
// test after a generous bound, which only a broken build reaches).
func (e *env) waitAttached(id string) {
	e.t.Helper()
	select {
	case <-e.attachCh(id):
	case <-time.After(10 * time.Second):
		e.t.Fatalf("GET stream of session %s never attached", id)
	}
}

// endpoint creates an endpoint and returns it with its credential.
func (e *env) endpoint(agentID string, queues, verbs []string, tweak ...func(*store.EndpointSpec)) (store.Endpoint, string) {
	e.t.Helper()
	if verbs == nil {
		verbs = store.AllVerbs()
	}
	spec := store.EndpointSpec{Queues: &queues, Verbs: &verbs}
	for _, f := range tweak {
		f(&spec)
	}
	ep, cred, err := e.st.CreateEndpoint(context.Background(), agentID, spec, "human:test")
	if err != nil {
		e.t.Fatal(err)
	}
	return ep, cred
}

// agentClient is a connected MCP client and the notifications it received.
type agentClient struct {
	*client.Client
	init  *mcp.InitializeResult
	notes chan mcp.JSONRPCNotification

	url, cred string
	mu        sync.Mutex
	schemas   map[string]*jsonschema.Schema // tool → its outputSchema, as listed
	// unchecked skips the outputSchema check: benchmarks time the server, and
	// the check is the test client's work on the same cores.
	unchecked bool
}

func (e *env) dial(cred string, listen bool) *agentClient {
	e.t.Helper()
	ac := &agentClient{notes: make(chan mcp.JSONRPCNotification, 256)}
	c, res, err := mcpclient.Dial(context.Background(), e.url, cred, mcpclient.DialOptions{Listen: listen, Logger: e.quiet, OnNotification: func(n mcp.JSONRPCNotification) {
		select {
		case ac.notes <- n:
		default:
		}
	}})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	ac.Client, ac.init, ac.url, ac.cred = c, res, e.url, cred
	if listen {
		e.waitAttached(c.GetSessionId())
	}
	return ac
}

// call calls a tool and returns the raw result (nil with err for protocol errors).
// A result that does not match the tool's outputSchema is an error too, refusals
// included (the TypeScript SDK checks both), so every call a test makes checks
// the schema agents are given.
func (ac *agentClient) call(tool string, args map[string]any) (*mcp.CallToolResult, error) {
	res, err := ac.CallTool(context.Background(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil || ac.unchecked {
		return res, err
	}
	if err := ac.checkOutput(tool, res); err != nil {
		return res, fmt.Errorf("%s answered %s, which its outputSchema refuses: %w", tool, res.RawStructuredContent, err)
	}
	return res, nil
}

// checkOutput checks a result against the outputSchema the session listed for
// the tool (tools without one, a module's, are not checked).
func (ac *agentClient) checkOutput(tool string, res *mcp.CallToolResult) error {
	ac.mu.Lock()
	defer ac.mu.Unlock()
	if _, ok := ac.schemas[tool]; !ok {
		listed, err := ac.listedOutputSchemas()
		if err != nil {
			return err
		}
		ac.schemas = map[string]*jsonschema.Schema{}
		for name, raw := range listed {
			if raw == nil {
				ac.schemas[name] = nil
				continue
			}
			doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
			if err != nil {
				return err
			}
			c := jsonschema.NewCompiler()
			if err := c.AddResource("mem:///"+name, doc); err != nil {
				return err
			}
			if ac.schemas[name], err = c.Compile("mem:///" + name); err != nil {
				return fmt.Errorf("the outputSchema of %s does not compile: %w", name, err)
			}
		}
	}
	schema := ac.schemas[tool]
	if schema == nil {
		return nil
	}
	if len(res.RawStructuredContent) == 0 {
		if res.IsError {
			return nil // the TypeScript SDK asks an error for none
		}
		return fmt.Errorf("no structuredContent")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(res.RawStructuredContent))
	if err != nil {
		return err
	}
	return schema.Validate(doc)
}

// listedOutputSchemas lists the session's tools and returns each one's
// outputSchema as sent (nil: none). It reads tools/list itself, because mcp-go's
// typed listing keeps only part of a schema (not its anyOf).
func (ac *agentClient) listedOutputSchemas() (map[string]json.RawMessage, error) {
	body := `{"jsonrpc":"2.0","id":"list-schemas","method":"tools/list"}`
	req, err := http.NewRequest(http.MethodPost, ac.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+ac.cred)
	req.Header.Set("Mcp-Session-Id", ac.GetSessionId())
	req.Header.Set("Mcp-Protocol-Version", ac.init.ProtocolVersion)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("list tools: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list tools: %d %s", resp.StatusCode, raw)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		for line := range strings.Lines(string(raw)) {
			if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data:"); ok {
				raw = []byte(data)
			}
		}
	}
	var answer struct {
		Result struct {
			Tools []struct {
				Name         string          `json:"name"`
				OutputSchema json.RawMessage `json:"outputSchema"`
			} `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil {
		return nil, fmt.Errorf("list tools: %w in %s", err, raw)
	}
	out := map[string]json.RawMessage{}
	for _, t := range answer.Result.Tools {
		out[t.Name] = t.OutputSchema
	}
	return out, nil
}

// ok calls a tool that must succeed and decodes its structuredContent into out.
func (ac *agentClient) ok(t testing.TB, tool string, args map[string]any, out any) {
	t.Helper()
	res, err := ac.call(tool, args)
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		t.Fatalf("%s: error result %s", tool, text(res))
	}
	if out != nil {
		if err := json.Unmarshal(res.RawStructuredContent, out); err != nil {
			t.Fatalf("%s: decode structuredContent %s: %v", tool, res.RawStructuredContent, err)
		}
	}
}

// code calls a tool that must fail with a tool error and returns its code.
func (ac *agentClient) code(t testing.TB, tool string, args map[string]any) string {
	t.Helper()
	res, err := ac.call(tool, args)
	if err != nil {
		t.Fatalf("%s: protocol error %v, want a tool error", tool, err)
	}
	if !res.IsError {
		t.Fatalf("%s: succeeded (%s), want an error", tool, text(res))
	}
	var p errorPayload
	if err := json.Unmarshal(res.RawStructuredContent, &p); err != nil || p.Code == "" {
		t.Fatalf("%s: error without a code: %s", tool, res.RawStructuredContent)
	}
	// The code says it once: the store's sentinel is not repeated at the end.
	for _, said := range []error{store.ErrNotFound, store.ErrConflict, store.ErrAlreadyExists, store.ErrInvalid} {
		if strings.HasSuffix(p.Message, ": "+said.Error()) {
			t.Errorf("%s: message %q repeats its code", tool, p.Message)
		}
	}
	return p.Code
}

func text(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if tc, ok := c.(mcp.TextContent); ok {
			return tc.Text
		}
	}
	return ""
}

func (e *env) addTodo(queue, payload string) store.Todo {
	e.t.Helper()
	td, err := e.st.AddTodo(context.Background(), store.NewTodo{Queue: queue, Payload: payload, CreatedBy: "human:test"})
	if err != nil {
		e.t.Fatal(err)
	}
	return td
}

func (e *env) todo(id int64) store.Todo {
	e.t.Helper()
	td, err := e.st.Todo(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return td
}

func decodeResult(res *mcp.CallToolResult, out any) error {
	return json.Unmarshal(res.RawStructuredContent, out)
}

func errFromResult(tool string, res *mcp.CallToolResult, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", tool, err)
	}
	return fmt.Errorf("%s: %s", tool, text(res))
}

// waitNote waits for the next notification of method on c, skipping others. The
// bound only stops a broken build from hanging; nothing is timed.
func waitNote(t testing.TB, c *agentClient, method string) mcp.JSONRPCNotification {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case n := <-c.notes:
			if n.Method == method {
				return n
			}
		case <-deadline:
			t.Fatalf("no %s arrived", method)
		}
	}
}
