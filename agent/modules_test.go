package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/store"
)

// The supervisor and its processes are tested in modules/ and end to end in the
// main package; here a catalog in memory stands in for it, so the policy, the
// limits and the error mapping can be driven exactly.

const fakeSchema = `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"text":{"type":"string"}}}`

func fakeTool(module, name string) modules.Tool {
	def := fmt.Sprintf(`{"name":%q,"description":"%s tool","inputSchema":%s,"annotations":{"readOnlyHint":true}}`, name, module, fakeSchema)
	return modules.Tool{Name: name, Module: module, Upstream: strings.TrimPrefix(name, module+"_"),
		Definition: json.RawMessage(def), Hash: "h-" + name, Available: true}
}

// fakeCatalog answers Call the way the supervisor does for arguments that are
// not an object and for unknown, withheld and unavailable tools, and otherwise
// runs handle.
type fakeCatalog struct {
	mu     sync.Mutex
	tools  []modules.Tool
	handle func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error)
}

func (f *fakeCatalog) Tools() []modules.Tool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.tools)
}

func (f *fakeCatalog) set(name string, edit func(*modules.Tool)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.tools {
		if f.tools[i].Name == name {
			edit(&f.tools[i])
		}
	}
}

func (f *fakeCatalog) Call(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
	if err := modules.CheckArguments(args); err != nil {
		return nil, fmt.Errorf("%w: %q", err, tool)
	}
	i := slices.IndexFunc(f.Tools(), func(t modules.Tool) bool { return t.Name == tool })
	if i < 0 {
		return nil, modules.ErrUnknownTool
	}
	t := f.Tools()[i]
	switch {
	case t.Withheld:
		return nil, modules.ErrWithheld
	case !t.Available:
		return nil, modules.ErrUnavailable
	}
	return f.handle(ctx, tool, args)
}

// echoResult answers like a module would, with fields mcp-go's types do not know.
func echoResult(_ context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
	return json.RawMessage(fmt.Sprintf(`{"content":[{"type":"text","text":"%s","annotations":{"priority":0.5},"_meta":{"x.example/k":1}}],`+
		`"structuredContent":{"tool":%q,"args":%s}}`, tool, tool, args)), nil
}

// lateModules lets a test build Modules on the env's store after newEnv opened it.
type lateModules struct{ *Modules }

type moduleEnv struct {
	*env
	cat  *fakeCatalog
	mods *Modules
}

func newModuleEnv(t *testing.T, opts ModuleOptions, tools ...modules.Tool) *moduleEnv {
	t.Helper()
	return newModuleEnvWith(t, func(*envConfig) {}, opts, tools...)
}

// newModuleEnvWith is newModuleEnv with a change to the env's configuration.
func newModuleEnvWith(t *testing.T, tweak func(*envConfig), opts ModuleOptions, tools ...modules.Tool) *moduleEnv {
	t.Helper()
	src := &lateModules{}
	e := newEnv(t, tweak, func(c *envConfig) { c.agent.ToolSources = []ToolSource{src} })
	cat := &fakeCatalog{tools: tools, handle: echoResult}
	opts.Logger = e.quiet
	src.Modules = NewModules(cat, e.st, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { src.Run(ctx, e.ag.RefreshGranted); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return &moduleEnv{env: e, cat: cat, mods: src.Modules}
}

func grant(caps, allow, deny []string) func(*store.EndpointSpec) {
	return func(s *store.EndpointSpec) { s.Capabilities, s.ToolAllow, s.ToolDeny = &caps, &allow, &deny }
}

func (ac *agentClient) toolNames(t *testing.T) []string {
	t.Helper()
	res, err := ac.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tool := range res.Tools {
		if !store.KnownVerb(tool.Name) {
			out = append(out, tool.Name)
		}
	}
	slices.Sort(out)
	return out
}

func TestModuleToolPolicy(t *testing.T) {
	e := newModuleEnv(t, ModuleOptions{},
		fakeTool("alpha", "alpha_one"), fakeTool("alpha", "alpha_two"), fakeTool("beta", "beta_one"))
	all := []string{"alpha_one", "alpha_two", "beta_one"}
	for _, tc := range []struct {
		name              string
		caps, allow, deny []string
		want              []string
	}{
		{"nothing granted", nil, nil, nil, nil},
		{"one capability", []string{"alpha"}, nil, nil, []string{"alpha_one", "alpha_two"}},
		{"allow list narrows", []string{"alpha", "beta"}, []string{"alpha_one", "beta_one"}, nil, []string{"alpha_one", "beta_one"}},
		{"allow list cannot widen", []string{"alpha"}, []string{"alpha_one", "beta_one"}, nil, []string{"alpha_one"}},
		{"deny list", []string{"alpha", "beta"}, nil, []string{"alpha_two"}, []string{"alpha_one", "beta_one"}},
		{"deny wins over allow", []string{"alpha"}, []string{"alpha_one"}, []string{"alpha_one"}, nil},
		{"an unknown capability grants nothing", []string{"gamma"}, nil, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cred := e.endpoint(strings.ReplaceAll(tc.name, " ", "-"), []string{"q"}, nil, grant(tc.caps, tc.allow, tc.deny))
			c := e.dial(cred, false)
			if got := c.toolNames(t); !slices.Equal(got, tc.want) {
				t.Fatalf("listed %v, want %v", got, tc.want)
			}
			for _, tool := range all {
				if slices.Contains(tc.want, tool) {
					var out struct {
						Tool string         `json:"tool"`
						Args map[string]any `json:"args"`
					}
					c.ok(t, tool, map[string]any{"text": "hi"}, &out)
					if out.Tool != tool || out.Args["text"] != "hi" {
						t.Errorf("%s answered %+v", tool, out)
					}
				} else if code := c.code(t, tool, map[string]any{"text": "hi"}); code != CodeForbidden {
					t.Errorf("%s (not granted) refused with %s, want forbidden", tool, code)
				}
			}
			// A name no module offers is unknown, as for any tool.
			if _, err := c.call("alpha_three", nil); err == nil {
				t.Error("a tool no module offers was callable")
			}
		})
	}
}

func TestModuleToolsFollowGrantsAndAvailability(t *testing.T) {
	e := newModuleEnv(t, ModuleOptions{}, fakeTool("alpha", "alpha_one"), fakeTool("alpha", "alpha_two"))
	ep, cred := e.endpoint("mover", []string{"q"}, nil)
	c := e.dial(cred, false)
	if got := c.toolNames(t); len(got) != 0 {
		t.Fatalf("listed %v before any grant", got)
	}
	// A grant applies from the next request, to the session already open.
	caps := []string{"alpha"}
	if _, err := e.st.UpdateEndpoint(t.Context(), ep.ID, store.EndpointSpec{Capabilities: &caps}, "human:test"); err != nil {
		t.Fatal(err)
	}
	if got := c.toolNames(t); !slices.Equal(got, []string{"alpha_one", "alpha_two"}) {
		t.Fatalf("after the grant: listed %v", got)
	}
	c.ok(t, "alpha_one", nil, nil)

	// Down and withheld tools are not listed, and calls say unavailable at once.
	e.cat.set("alpha_one", func(t *modules.Tool) { t.Available = false })
	e.cat.set("alpha_two", func(t *modules.Tool) { t.Available, t.Withheld = false, true })
	if got := c.toolNames(t); len(got) != 0 {
		t.Fatalf("listed %v while down and withheld", got)
	}
	for _, tool := range []string{"alpha_one", "alpha_two"} {
		if code := c.code(t, tool, nil); code != CodeUnavailable {
			t.Errorf("%s refused with %s, want unavailable", tool, code)
		}
	}

	// The module's change reaches the live session as tools/list_changed.
	listener := e.dial(cred, true)
	e.cat.set("alpha_one", func(t *modules.Tool) { t.Available = true })
	e.mods.Changed("alpha")
	waitNote(t, listener, string(mcp.MethodNotificationToolsListChanged))
	if got := listener.toolNames(t); !slices.Equal(got, []string{"alpha_one"}) {
		t.Fatalf("after the module came back: listed %v", got)
	}

	// Revoking the grant refuses at once.
	none := []string{}
	if _, err := e.st.UpdateEndpoint(t.Context(), ep.ID, store.EndpointSpec{Capabilities: &none}, "human:test"); err != nil {
		t.Fatal(err)
	}
	if code := c.code(t, "alpha_one", nil); code != CodeForbidden {
		t.Fatalf("after the grant was withdrawn: %s, want forbidden", code)
	}
}

func TestModuleResultsPassThroughUnchanged(t *testing.T) {
	e := newModuleEnv(t, ModuleOptions{}, fakeTool("alpha", "alpha_one"), fakeTool("alpha", "alpha_fails"))
	e.cat.handle = func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
		if tool == "alpha_fails" {
			return json.RawMessage(`{"content":[{"type":"text","text":"upstream said no"}],"isError":true}`), nil
		}
		return echoResult(ctx, tool, args)
	}
	_, cred := e.endpoint("raw", []string{"q"}, nil, grant([]string{"alpha"}, nil, nil))
	c := e.dial(cred, false)
	sid := c.GetSessionId()

	// tools/list on the wire: the module's schema, $schema included.
	_, body := e.raw(http.MethodPost, cred, sid, listToolsBody, nil)
	if !strings.Contains(body, `"$schema":"https://json-schema.org/draft/2020-12/schema"`) {
		t.Fatalf("tools/list lost the module's $schema: %s", body)
	}

	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alpha_one","arguments":{"text":"big 12345678901234567890"}}}`
	_, body = e.raw(http.MethodPost, cred, sid, call, nil)
	for _, want := range []string{
		`"annotations":{"priority":0.5}`, `"_meta":{"x.example/k":1}`, // content block kept whole
		`"args":{"text":"big 12345678901234567890"}`, // arguments forwarded as sent
	} {
		if !strings.Contains(body, want) {
			t.Errorf("result lost %s: %s", want, body)
		}
	}
	res, err := c.call("alpha_fails", nil)
	if err != nil || !res.IsError || text(res) != "upstream said no" {
		t.Fatalf("a module's isError result = %+v, %v; want it unchanged", res, err)
	}
}

func TestModuleCallErrorsMapToCodes(t *testing.T) {
	e := newModuleEnv(t, ModuleOptions{}, fakeTool("alpha", "alpha_one"))
	_, cred := e.endpoint("errs", []string{"q"}, nil, grant([]string{"alpha"}, nil, nil))
	c := e.dial(cred, false)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"module answered invalid params", &modules.RPCError{Code: mcp.INVALID_PARAMS, Message: "text is required"}, CodeInvalidArgument},
		{"module answered an internal error", &modules.RPCError{Code: mcp.INTERNAL_ERROR, Message: "boom"}, CodeUnavailable},
		{"module did not answer in time", fmt.Errorf("modules: tools/call: %w", context.DeadlineExceeded), CodeUnavailable},
		{"session broke mid-call", fmt.Errorf("%w: tools/call: EOF", modules.ErrUnavailable), CodeUnavailable},
		{"tool left the catalog", fmt.Errorf("%w: %q", modules.ErrUnknownTool, "alpha_one"), CodeNotFound},
	} {
		e.cat.handle = func(context.Context, string, json.RawMessage) (json.RawMessage, error) { return nil, tc.err }
		if code := c.code(t, "alpha_one", nil); code != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, code, tc.want)
		}
	}
	e.cat.handle = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`not json`), nil
	}
	if code := c.code(t, "alpha_one", nil); code != CodeUnavailable {
		t.Errorf("malformed result: %s, want unavailable", code)
	}
}

// A module tool's outputSchema says nothing of the gateway's refusals: a refusal
// of such a tool carries its code and message in the text alone, so that a client
// checking structuredContent against the schema (the official TypeScript SDK
// does, errors too) reads the refusal rather than throw. A module's own error
// result passes as it came; a tool without an outputSchema keeps the structured
// refusal.
func TestModuleRefusalOfAToolWithAnOutputSchema(t *testing.T) {
	typed := fakeTool("alpha", "alpha_count")
	typed.HasOutputSchema = true
	typed.Definition = json.RawMessage(`{"name":"alpha_count","inputSchema":{"type":"object"},` +
		`"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}}`)
	e := newModuleEnv(t, ModuleOptions{}, typed, fakeTool("alpha", "alpha_one"))
	_, cred := e.endpoint("typed", []string{"q"}, nil, grant([]string{"alpha"}, nil, nil))
	c := e.dial(cred, false)
	e.cat.set("alpha_count", func(t *modules.Tool) { t.Available = false })
	e.cat.set("alpha_one", func(t *modules.Tool) { t.Available = false })
	res, err := c.call("alpha_count", nil)
	if err != nil || !res.IsError || res.StructuredContent != nil || len(res.RawStructuredContent) != 0 ||
		!strings.HasPrefix(text(res), CodeUnavailable+": module alpha is not running") {
		t.Fatalf("refusal of a tool with an outputSchema: %+v, %v (text %q)", res, err, text(res))
	}
	if code := c.code(t, "alpha_one", nil); code != CodeUnavailable {
		t.Fatalf("refusal of a tool without one: %s", code)
	}

	e.cat.set("alpha_count", func(t *modules.Tool) { t.Available = true })
	e.cat.handle = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"isError":true,"content":[{"type":"text","text":"no"}],"structuredContent":{"n":0}}`), nil
	}
	res, err = c.call("alpha_count", nil)
	if err != nil || !res.IsError || string(res.RawStructuredContent) != `{"n":0}` {
		t.Fatalf("the module's own error result: %+v, %v", res, err)
	}
}

// The endpoint's rate limit refuses before the module's handler runs; its refusal
// of a tool with an outputSchema carries no structuredContent either.
func TestModuleRateLimitRefusalOfAToolWithAnOutputSchema(t *testing.T) {
	typed := fakeTool("alpha", "alpha_count")
	typed.HasOutputSchema = true
	typed.Definition = json.RawMessage(`{"name":"alpha_count","inputSchema":{"type":"object"},` +
		`"outputSchema":{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"],"additionalProperties":false}}`)
	e := newModuleEnv(t, ModuleOptions{}, typed)
	e.cat.handle = func(context.Context, string, json.RawMessage) (json.RawMessage, error) {
		return json.RawMessage(`{"content":[{"type":"text","text":"1"}],"structuredContent":{"n":1}}`), nil
	}
	_, cred := e.endpoint("hasty", []string{"q"}, nil, grant([]string{"alpha"}, nil, nil), func(s *store.EndpointSpec) {
		s.RatePerSecond, s.RateBurst = ptr(1.0/3600), ptr(1)
	})
	c := e.dial(cred, false)
	if res, err := c.call("alpha_count", nil); err != nil || res.IsError {
		t.Fatalf("first call: %+v, %v", res, err)
	}
	res, err := c.call("alpha_count", nil)
	if err != nil || !res.IsError || res.StructuredContent != nil || len(res.RawStructuredContent) != 0 ||
		!strings.HasPrefix(text(res), CodeRateLimited+":") {
		t.Fatalf("rate-limited call of a tool with an outputSchema: %+v, %v (text %q)", res, err, text(res))
	}
}

func TestModuleConcurrencyLimitAnswersAtOnce(t *testing.T) {
	e := newModuleEnv(t, ModuleOptions{Concurrency: 1}, fakeTool("alpha", "alpha_slow"), fakeTool("beta", "beta_one"))
	entered, release := make(chan struct{}), make(chan struct{})
	e.cat.handle = func(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
		if tool == "alpha_slow" && string(args) == `{"hold":true}` {
			close(entered)
			<-release
		}
		return echoResult(ctx, tool, args)
	}
	_, cred := e.endpoint("busy", []string{"q"}, nil, grant([]string{"alpha", "beta"}, nil, nil))
	c := e.dial(cred, false)
	held := make(chan error, 1)
	go func() {
		res, err := c.call("alpha_slow", map[string]any{"hold": true})
		if err == nil && res.IsError {
			err = fmt.Errorf("held call failed: %s", text(res))
		}
		held <- err
	}()
	<-entered
	// The module's one slot is taken: the next call is refused without waiting
	// (it would block forever on release otherwise), other modules are unaffected.
	if code := c.code(t, "alpha_slow", nil); code != CodeRateLimited {
		t.Fatalf("call over the limit: %s, want rate_limited", code)
	}
	c.ok(t, "beta_one", nil, nil)
	close(release)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	c.ok(t, "alpha_slow", nil, nil) // the slot was given back
}

func TestModuleCallsAreAuditedWithoutArguments(t *testing.T) {
	var mu sync.Mutex
	var observed []ModuleCall
	e := newModuleEnv(t, ModuleOptions{Observe: func(c ModuleCall) { mu.Lock(); observed = append(observed, c); mu.Unlock() }},
		fakeTool("alpha", "alpha_one"), fakeTool("beta", "beta_one"))
	_, cred := e.endpoint("audited", []string{"q"}, nil, grant([]string{"alpha"}, nil, nil))
	c := e.dial(cred, false)
	const canary = "secret-argument-canary"
	c.ok(t, "alpha_one", map[string]any{"text": canary}, nil)
	c.code(t, "beta_one", map[string]any{"text": canary})

	rows, err := e.st.ListAudit(t.Context(), store.AuditFilter{Action: "module.call"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range rows {
		if r.Actor != "agent:audited" || !strings.HasPrefix(r.Detail, "duration_ms=") {
			t.Errorf("audit row %+v", r)
		}
		if strings.Contains(r.Detail+r.Target, canary) {
			t.Errorf("audit row carries the arguments: %+v", r)
		}
		got[r.Target] = r.Outcome
	}
	if want := map[string]string{"alpha_one": OutcomeOK, "beta_one": OutcomeForbidden}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("audited outcomes %v, want %v", got, want)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(observed) != 2 || observed[0].Module != "alpha" || observed[0].Outcome != OutcomeOK || observed[1].Outcome != OutcomeForbidden {
		t.Fatalf("observed %+v", observed)
	}
}

// A call the agent cancels is recorded as cancelled, not as a module too slow to
// answer: the module was told to stop, and the agent gave up.
func TestModuleCallCancelledByTheAgent(t *testing.T) {
	calls := make(chan ModuleCall, 1)
	e := newModuleEnv(t, ModuleOptions{Observe: func(c ModuleCall) { calls <- c }}, fakeTool("alpha", "alpha_slow"))
	_, cred := e.endpoint("impatient", []string{"q"}, nil, grant([]string{"alpha"}, nil, nil))
	c := e.dial(cred, false)
	started := make(chan struct{})
	e.cat.handle = func(ctx context.Context, _ string, _ json.RawMessage) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-started; cancel() }()
	c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "alpha_slow"}})
	select {
	case got := <-calls:
		if got.Outcome != OutcomeCancelled {
			t.Fatalf("a cancelled call was recorded %q, want %q", got.Outcome, OutcomeCancelled)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the cancelled call was never recorded")
	}
}

// An endpoint granted capability modules alone works no queues: its session is
// told so (not to loop on claim_next), and lists the module tools and nothing
// else.
func TestModuleOnlyEndpoint(t *testing.T) {
	e := newModuleEnv(t, ModuleOptions{}, fakeTool("alpha", "alpha_one"))
	_, cred := e.endpoint("tools", []string{}, []string{}, grant([]string{"alpha"}, nil, nil))
	c := e.dial(cred, false)
	if got := c.init.Instructions; !strings.Contains(got, "works no queues") || !strings.Contains(got, "(alpha)") ||
		strings.Contains(got, "claim_next") {
		t.Fatalf("instructions of a module-only endpoint: %q", got)
	}
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Tools) != 1 || res.Tools[0].Name != "alpha_one" {
		t.Fatalf("tools of a module-only endpoint: %+v", res.Tools)
	}
	c.ok(t, "alpha_one", map[string]any{"text": "hi"}, nil)
}

// Arguments that are not a JSON object are refused before the module hears of
// them, with the answer agents have always had: invalid_argument, "arguments must
// be a JSON object". The rule is the modules package's (Call checks it); agent
// only maps its error.
func TestModuleCallRefusesArgumentsThatAreNotAnObject(t *testing.T) {
	e := newModuleEnv(t, ModuleOptions{}, fakeTool("alpha", "alpha_one"))
	_, cred := e.endpoint("args", []string{"q"}, nil, grant([]string{"alpha"}, nil, nil))
	c := e.dial(cred, false)
	var forwarded []string
	e.cat.handle = func(_ context.Context, _ string, args json.RawMessage) (json.RawMessage, error) {
		forwarded = append(forwarded, string(args))
		return echoResult(context.Background(), "alpha_one", args)
	}
	for _, args := range []any{[]any{1, 2}, "text", 7} {
		res, err := c.CallTool(t.Context(), mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "alpha_one", Arguments: args}})
		if err != nil {
			t.Fatalf("%v: protocol error %v, want a tool error", args, err)
		}
		var p errorPayload
		if !res.IsError || json.Unmarshal(res.RawStructuredContent, &p) != nil {
			t.Fatalf("%v: %s, want a refusal", args, res.RawStructuredContent)
		}
		if p.Code != CodeInvalidArgument || p.Message != "arguments must be a JSON object" {
			t.Errorf("%v: refused with %s %q", args, p.Code, p.Message)
		}
	}
	if forwarded != nil {
		t.Fatalf("the module was called with %q", forwarded)
	}
	// An object, or no arguments at all, passes.
	c.ok(t, "alpha_one", map[string]any{"text": "x"}, nil)
	c.ok(t, "alpha_one", nil, nil)
}
