package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/store"
)

// Module tools are the capability modules' tools, re-exposed. An endpoint sees
// exactly the available, approved tools of the capabilities it is granted, narrowed by
// its exact tool allow list (when not empty) and deny list. Every session's tool map
// nevertheless carries every catalogued module tool, so that calling one the endpoint
// may not use is refused with a code (forbidden, unavailable) rather than answered
// "unknown tool"; the tool filter keeps those out of tools/list, and lets one through
// only for the tools/call that names it (see noteCall).

// ModuleCatalog is what the gateway needs from the module supervisor
// (*modules.Supervisor): the catalog and a way to forward a call. Processes,
// sessions and restarts stay behind it.
type ModuleCatalog interface {
	// Tools is the last known catalog; only Available tools may be called.
	Tools() []modules.Tool
	// Call forwards tools/call and returns the module's result JSON unchanged.
	Call(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error)
}

// Outcomes of a module call, as audited and counted.
const (
	OutcomeOK          = "ok"           // the module answered; isError false
	OutcomeError       = "error"        // the module answered with isError or an RPC error
	OutcomeUnavailable = "unavailable"  // module down, tool withheld, or no answer in time
	OutcomeForbidden   = "forbidden"    // not granted to the endpoint
	OutcomeRateLimited = "rate_limited" // the module's concurrency limit was full
	OutcomeNotFound    = "not_found"    // the tool left the catalog
	OutcomeCancelled   = "cancelled"    // the agent gave up on the call before the module answered
)

// ModuleCall is one finished module call, for metrics.
type ModuleCall struct {
	Module, Tool, Outcome string
	Duration              time.Duration
}

// ModuleOptions configure NewModules. The zero value is usable.
type ModuleOptions struct {
	// Concurrency bounds the calls in flight per module (default 8). A call beyond
	// it is refused at once as rate_limited: a slow module must not pile up
	// requests without bound.
	Concurrency int
	// Observe, if set, is told of every call after it finished (metrics).
	Observe func(ModuleCall)
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
	// MaxPendingInput bounds, per endpoint, the module calls waiting for the
	// agent's answer to an elicitation (default 4). A question beyond it is
	// refused to the module.
	MaxPendingInput int
}

// Modules is the ToolSource of module tools. Give it to Options.ToolSources, hand
// Changed to the supervisor as its OnChange, and run Run beside the Agent.
type Modules struct {
	cat  ModuleCatalog
	st   *store.Store
	opts ModuleOptions
	log  *slog.Logger

	mu      sync.Mutex
	slots   map[string]chan struct{} // module → its concurrency semaphore
	pending map[string]bool          // modules changed since Run last refreshed
	wake    chan struct{}

	waiting pendingRuns // calls waiting for their agent's answer to a module's question
	runs    runGroup    // calls running apart from their requests (moduleruns.go)
}

// NewModules returns the module tool source over cat, auditing calls in st.
func NewModules(cat ModuleCatalog, st *store.Store, opts ModuleOptions) *Modules {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 8
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxPendingInput <= 0 {
		opts.MaxPendingInput = 4
	}
	return &Modules{cat: cat, st: st, opts: opts, log: opts.Logger,
		slots: map[string]chan struct{}{}, pending: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// mayUse is the whole module-tool policy: the capability is granted, and the exact
// name passes the allow list (if any) and the deny list.
func mayUse(ep store.Endpoint, module, tool string) bool {
	return slices.Contains(ep.Capabilities, module) &&
		(len(ep.ToolAllow) == 0 || slices.Contains(ep.ToolAllow, tool)) &&
		!slices.Contains(ep.ToolDeny, tool)
}

// SessionTools implements ToolSource: every catalogued tool with its handler.
// Which of them ep sees is Hidden's business.
func (m *Modules) SessionTools(_ context.Context, _ store.Endpoint) []server.ServerTool {
	var out []server.ServerTool
	for _, t := range m.cat.Tools() {
		def, err := t.MCPTool()
		if err != nil {
			m.log.Warn("module tool has an undecodable definition; not offered", "tool", t.Name, "err", err)
			continue
		}
		out = append(out, server.ServerTool{Tool: def, Handler: m.handler(t.Name)})
	}
	return out
}

// Hidden names the tools SessionTools offers that ep must not see listed: those it
// may not use, and those that are down or withheld right now.
func (m *Modules) Hidden(ep store.Endpoint) map[string]bool {
	out := map[string]bool{}
	for _, t := range m.cat.Tools() {
		if !t.Available || !mayUse(ep, t.Module, t.Name) {
			out[t.Name] = true
		}
	}
	return out
}

func (m *Modules) lookup(name string) (modules.Tool, bool) {
	for _, t := range m.cat.Tools() {
		if t.Name == name {
			return t, true
		}
	}
	return modules.Tool{}, false
}

// handler serves one module tool. The endpoint's rate limit has already been
// applied around it (Agent.limit); the endpoint itself is fresh for this request.
// A call that carries a requestState answers a module's question (see elicit.go).
func (m *Modules) handler(name string) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ep, _ := EndpointFromContext(ctx)
		if req.Params.RequestState != "" || len(req.Params.InputResponses) > 0 {
			return m.resume(ctx, ep, name, req), nil
		}
		start := time.Now()
		t, known := m.lookup(name)
		res, outcome, run := m.call(ctx, ep, t, known, req, start)
		if run != nil {
			return m.await(ctx, run), nil
		}
		m.record(ctx, ep, name, t.Module, outcome, time.Since(start))
		// A refusal of a tool with an outputSchema loses its structuredContent
		// in the wrapper every source's tool gets (refusalsAsText).
		return res, nil
	}
}

// call refuses the call, or starts it as a run that ends (and is recorded) on
// its own.
func (m *Modules) call(ctx context.Context, ep store.Endpoint, t modules.Tool, known bool, req mcp.CallToolRequest,
	start time.Time) (*mcp.CallToolResult, string, *moduleRun) {
	switch {
	case !known:
		return errorf(CodeNotFound, "no module offers the tool %s any more", req.Params.Name).result(), OutcomeNotFound, nil
	case !mayUse(ep, t.Module, t.Name):
		return errorf(CodeForbidden, "the tool %s is not granted to this endpoint", t.Name).result(), OutcomeForbidden, nil
	}
	args, err := callArguments(req)
	if err != nil {
		return errorf(CodeInvalidArgument, "arguments: %v", err).result(), OutcomeError, nil
	}
	release, ok := m.acquire(t.Module)
	if !ok {
		return errorf(CodeRateLimited, "module %s already has %d calls in flight; retry shortly",
			t.Module, m.opts.Concurrency).result(), OutcomeRateLimited, nil
	}
	run := &moduleRun{endpointID: ep.ID, tool: t.Name, args: args, asks: make(chan elicitAsk), done: make(chan runEnd, 1)}
	run.caps, run.noElicit = elicitationOf(ctx)
	// The run outlives this request when the module asks a question: only
	// await cancels it, while it waits on the run.
	runCtx, cancel := runContext(ctx)
	run.cancel = cancel
	m.runs.start()
	go func() {
		defer m.runs.end()
		defer cancel()
		raw, err := m.cat.Call(withElicitor(runCtx, run), t.Name, args)
		release()
		res, outcome := m.result(runCtx, t, raw, err)
		m.waiting.drop(run)
		m.record(runCtx, ep, t.Name, t.Module, outcome, time.Since(start))
		run.done <- runEnd{res}
	}()
	return nil, "", run
}

// callArguments are the arguments of req as JSON (nil when it has none).
func callArguments(req mcp.CallToolRequest) (json.RawMessage, error) {
	if req.Params.RawArguments != nil || req.Params.Arguments == nil {
		return req.Params.RawArguments, nil
	}
	return json.Marshal(req.Params.Arguments)
}

// runContext is the context of a run started by the request in ctx: its values
// and deadline, not its cancellation.
func runContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		return context.WithDeadline(context.WithoutCancel(ctx), dl)
	}
	return context.WithCancel(context.WithoutCancel(ctx))
}

// result maps the module's answer to the tool's result and its outcome.
func (m *Modules) result(ctx context.Context, t modules.Tool, raw json.RawMessage, err error) (*mcp.CallToolResult, string) {
	if err != nil {
		return m.callError(ctx, t, err)
	}
	res, err := moduleResult(raw)
	if err != nil {
		m.log.Warn("module returned a result that is not a tool result", "tool", t.Name, "err", err)
		return errorf(CodeUnavailable, "module %s returned a malformed result", t.Module).result(), OutcomeError
	}
	if res.IsError {
		return res, OutcomeError
	}
	return res, OutcomeOK
}

// callError maps what Call refused or failed with to a code. Nothing here waits:
// a module that is down answers at once, one that hangs is cut off by ctx.
func (m *Modules) callError(ctx context.Context, t modules.Tool, err error) (*mcp.CallToolResult, string) {
	var rpc *modules.RPCError
	switch {
	case errors.Is(err, modules.ErrArguments):
		return errorf(CodeInvalidArgument, "arguments must be a JSON object").result(), OutcomeError
	case errors.Is(err, modules.ErrWithheld):
		return errorf(CodeUnavailable, "the definition of %s changed and awaits a human's approval", t.Name).result(), OutcomeUnavailable
	case errors.Is(err, modules.ErrUnavailable):
		return errorf(CodeUnavailable, "module %s is not running; retry shortly", t.Module).result(), OutcomeUnavailable
	case errors.Is(err, modules.ErrUnknownTool):
		return errorf(CodeNotFound, "no module offers the tool %s any more", t.Name).result(), OutcomeNotFound
	case errors.Is(ctx.Err(), context.Canceled):
		// The agent cancelled the call (notifications/cancelled, or it hung up):
		// the module was told to stop, and no one waits for this answer.
		return errorf(CodeUnavailable, "the call was cancelled before module %s answered", t.Module).result(), OutcomeCancelled
	case ctx.Err() != nil, errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return errorf(CodeUnavailable, "module %s did not answer in time", t.Module).result(), OutcomeUnavailable
	case errors.As(err, &rpc) && rpc.Code == mcp.INVALID_PARAMS:
		return errorf(CodeInvalidArgument, "%s", rpc.Message).result(), OutcomeError
	case errors.As(err, &rpc):
		return errorf(CodeUnavailable, "module %s failed the call: %s", t.Module, rpc.Message).result(), OutcomeError
	}
	m.log.Warn("module call failed", "tool", t.Name, "err", err)
	return errorf(CodeUnavailable, "module %s could not complete the call; retry shortly", t.Module).result(), OutcomeError
}

// acquire takes one of the module's call slots without waiting.
func (m *Modules) acquire(module string) (release func(), ok bool) {
	m.mu.Lock()
	sem := m.slots[module]
	if sem == nil {
		sem = make(chan struct{}, m.opts.Concurrency)
		m.slots[module] = sem
	}
	m.mu.Unlock()
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, true
	default:
		return nil, false
	}
}

// record audits the call (never its arguments or result) and reports it.
func (m *Modules) record(ctx context.Context, ep store.Endpoint, tool, module, outcome string, d time.Duration) {
	// The call happened even if the client has gone: the audit row must still land.
	err := m.st.Audit(context.WithoutCancel(ctx), store.AuditEntry{
		Actor: "agent:" + ep.AgentID, Action: "module.call", Target: tool, Outcome: outcome,
		Detail: fmt.Sprintf("duration_ms=%d", d.Milliseconds()),
	})
	if err != nil {
		m.log.Error("audit module call", "tool", tool, "err", err)
	}
	if m.opts.Observe != nil {
		m.opts.Observe(ModuleCall{Module: module, Tool: tool, Outcome: outcome, Duration: d})
	}
}

// rawContent carries one content block of a module's result byte for byte.
// Embedding TextContent only lends it mcp.Content's marker method.
type rawContent struct {
	mcp.TextContent
	raw json.RawMessage
}

func (c rawContent) MarshalJSON() ([]byte, error) { return c.raw, nil }

// moduleResult wraps a module's tools/call result so that mcp-go writes its
// content, structuredContent, isError and _meta as the module sent them.
func moduleResult(raw json.RawMessage) (*mcp.CallToolResult, error) {
	var wire struct {
		Meta       *mcp.Meta         `json:"_meta"`
		Content    []json.RawMessage `json:"content"`
		Structured json.RawMessage   `json:"structuredContent"`
		IsError    bool              `json:"isError"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		return nil, err
	}
	res := &mcp.CallToolResult{IsError: wire.IsError, RawStructuredContent: wire.Structured}
	res.Meta = wire.Meta
	res.Content = make([]mcp.Content, 0, len(wire.Content))
	for _, c := range wire.Content {
		res.Content = append(res.Content, rawContent{raw: c})
	}
	return res, nil
}

// Changed is the supervisor's OnChange: it notes that module's tools changed and
// never blocks; Run refreshes the sessions concerned.
func (m *Modules) Changed(module string) {
	m.mu.Lock()
	m.pending[module] = true
	m.mu.Unlock()
	select {
	case m.wake <- struct{}{}:
	default: // a refresh is already due; it will see this module too
	}
}

// Run hands refresh, until ctx ends, the modules whose tools changed; serve
// wires it to Agent.RefreshGranted, so their clients hear tools/list_changed.
// The agent holds the Modules as a tool source, and Modules knows nothing of the
// agent: the two are wired, not tied.
func (m *Modules) Run(ctx context.Context, refresh func(ctx context.Context, modules map[string]bool)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.wake:
		}
		m.mu.Lock()
		changed := m.pending
		m.pending = map[string]bool{}
		m.mu.Unlock()
		refresh(ctx, changed)
	}
}

// RefreshGranted refreshes every endpoint with a live session or listener that is
// granted one of the capabilities.
func (a *Agent) RefreshGranted(ctx context.Context, caps map[string]bool) {
	a.forgetTools(0) // stateless requests' tools are rebuilt on their next request
	granted := func(ep store.Endpoint) bool {
		return slices.ContainsFunc(ep.Capabilities, func(c string) bool { return caps[c] })
	}
	ids := map[int64]bool{}
	for _, x := range a.sessions.all() {
		if granted(x.endpoint()) {
			ids[x.endpointID] = true
		}
	}
	for _, l := range a.listening.list() {
		if ep := l.endpoint(); granted(ep) {
			ids[ep.ID] = true
		}
	}
	for id := range ids {
		a.RefreshSessions(ctx, id)
	}
}

// hidingSource is a ToolSource whose SessionTools include tools an endpoint may
// call only to be refused; Hidden names those, and the tool filter keeps them out of
// tools/list.
type hidingSource interface {
	Hidden(ep store.Endpoint) map[string]bool
}

// callNote carries, through one HTTP request's context, the tool a tools/call
// names. mcp-go applies the tool filter to calls as well as to listings; the note
// lets a hidden tool through for exactly the call that names it, so its handler can
// say why it is refused.
type callNote struct {
	mu   sync.Mutex
	tool string
}

type callNoteKey struct{}

func withCallNote(ctx context.Context) context.Context {
	return context.WithValue(ctx, callNoteKey{}, &callNote{})
}

// noteCall is mcp-go's before-call hook.
func noteCall(ctx context.Context, _ any, req *mcp.CallToolRequest) {
	if n, ok := ctx.Value(callNoteKey{}).(*callNote); ok && req != nil {
		n.mu.Lock()
		n.tool = req.Params.Name
		n.mu.Unlock()
	}
}

func calledTool(ctx context.Context) string {
	n, ok := ctx.Value(callNoteKey{}).(*callNote)
	if !ok {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.tool
}

// hiddenTools is the set of source tools the filter drops for ep in ctx.
func (a *Agent) hiddenTools(ctx context.Context, ep store.Endpoint) map[string]bool {
	var out map[string]bool
	for _, src := range a.opts.ToolSources {
		if h, ok := src.(hidingSource); ok {
			for name := range h.Hidden(ep) {
				if out == nil {
					out = map[string]bool{}
				}
				out[name] = true
			}
		}
	}
	if called := calledTool(ctx); called != "" {
		delete(out, called)
	}
	return out
}
