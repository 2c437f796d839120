package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/store"
)

// Stateless requests: MCP 2026-07-28 keeps no session. Each request names its
// revision in its _meta (and in the Mcp-Protocol-Version header), carries its own
// credential, and is served alone: mcp-go gives it a session that lives as long as
// the request, and the agent puts in its place a requestSession holding the tools
// of the request's endpoint. Nothing of one request reaches another: mcp-go keys a
// session's tools by session id, and every stateless request has the same empty
// one, so they are never stored there.

// statelessVersion is the first revision without sessions.
const statelessVersion = mcp.ProtocolVersion20260728

// sessionRefusal is the agent's answer to a stateless request that names a
// session, which mcp-go would ignore.
const sessionRefusal = "Mcp-Session-Id is not part of protocol version " + statelessVersion +
	": its requests keep no session; send none"

// isModern says whether a request belongs to the stateless revision: its header
// or its message's _meta (env, nil for a message that is not JSON) names
// 2026-07-28 or later (mcp-go's rule; naming it in only one of the two is refused
// by checkModern).
func isModern(h http.Header, env *envelope) bool {
	return mcp.IsModernProtocol(h.Get(mcp.HeaderProtocolVersion)) || (env != nil && mcp.IsModernProtocol(readMeta(env).Version))
}

// requestMeta is what the agent reads of a stateless request's _meta: its
// protocol version, and whether it declares client capabilities that mcp-go
// can read. Its members are read raw, where mcp.Meta's decoder decodes them
// all, which cost a stateless call a twentieth of its time; by their exact
// names, as mcp.Meta does (a struct's tags would match any case).
type requestMeta struct {
	Version string
	Caps    bool
}

func readMeta(env *envelope) (m requestMeta) {
	var fields map[string]json.RawMessage
	if absent(env.Params.Meta) || json.Unmarshal(env.Params.Meta, &fields) != nil {
		return m
	}
	if v := fields[mcp.MetaKeyProtocolVersion]; len(v) > 0 {
		_ = json.Unmarshal(v, &m.Version)
	}
	if v := fields[mcp.MetaKeyClientCapabilities]; !absent(v) {
		var caps *mcp.ClientCapabilities
		m.Caps = json.Unmarshal(v, &caps) == nil && caps != nil
	}
	return m
}

// checkModern refuses, before anything is done, a stateless POST that the
// revision forbids: one that carries a session id or a Last-Event-ID, names its
// version in only one of header and _meta or two different ones, names one not
// served, gives a member twice or misspelt (memberProblem), declares no client
// capabilities (an empty object declares none, and is fine), or whose
// Mcp-Method or Mcp-Name header differs from its body. It
// writes the refusal and reports false. A message that is not JSON (env nil)
// passes, for mcp-go to refuse. The fast path relies on it for every refusal
// mcp-go would make of such a request.
func (a *Agent) checkModern(w http.ResponseWriter, r *http.Request, body []byte, env *envelope) bool {
	if env == nil && r.Header.Get(server.HeaderKeySessionID) != "" {
		// A body the envelope cannot read (mcp-go may still serve it).
		writeRPCError(w, json.RawMessage("null"), mcp.INVALID_REQUEST, sessionRefusal, http.StatusBadRequest)
		return false
	}
	if env == nil || (env.Method == "" && len(env.ID) > 0) {
		return true // not JSON, or a response, which mcp-go answers before any check
	}
	meta := readMeta(env)
	header, inBody := r.Header.Get(mcp.HeaderProtocolVersion), meta.Version
	msg := ""
	code := mcp.HEADER_MISMATCH
	// First what mcp-go's transport checks, which writes the id back as
	// mcp.RequestId reads it (echoID).
	switch {
	case r.Header.Get(server.HeaderKeySessionID) != "":
		code, msg = mcp.INVALID_REQUEST, sessionRefusal
	case r.Header.Get(mcp.HeaderLastEventID) != "":
		msg = "Last-Event-ID is not supported in protocol version " + statelessVersion +
			": streams are not resumable, re-issue the request with a new ID"
	case header == "":
		msg = mcp.HeaderProtocolVersion + " header is required for requests carrying " + mcp.MetaKeyProtocolVersion
	case inBody == "":
		code, msg = mcp.INVALID_PARAMS, "missing or invalid _meta field "+mcp.MetaKeyProtocolVersion
	case header != inBody:
		msg = mcp.HeaderProtocolVersion + " header " + strconv.Quote(header) + " does not match request " +
			mcp.MetaKeyProtocolVersion + " " + strconv.Quote(inBody)
	case !slices.Contains(SupportedProtocolVersions, inBody):
		// As mcp-go answers it, with the versions to use instead.
		refusal := mcp.UnsupportedProtocolVersionError{Version: inBody, Supported: SupportedProtocolVersions}.JSONRPCError()
		refusal.ID = mcp.NewRequestId(echoID(env.ID))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		json.NewEncoder(w).Encode(refusal)
		return false
	}
	if msg != "" {
		writeRPCError(w, echoID(env.ID), code, msg, http.StatusBadRequest)
		return false
	}
	// Then what its message handler checks, in its order, which writes the id
	// back as any JSON value (messageID). A notification is served once its
	// members and version pass.
	switch err := memberProblem(body); {
	case err != nil:
		code, msg = mcp.INVALID_REQUEST, err.Error()
	case env.JSONRPC != mcp.JSONRPC_VERSION:
		code, msg = mcp.INVALID_REQUEST, "Invalid JSON-RPC version"
	case absent(env.ID):
	case !meta.Caps:
		code, msg = mcp.INVALID_PARAMS, "missing or invalid _meta field "+mcp.MetaKeyClientCapabilities
	case env.Method != "":
		if err := standardHeaders(r.Header, env); err != nil {
			msg = err.Error()
		}
	}
	if msg == "" {
		return true
	}
	writeRPCError(w, messageID(env.ID), code, msg, http.StatusBadRequest)
	return false
}

// standardHeaders checks the Mcp-Method and Mcp-Name headers against the message,
// as mcp.ValidateStandardHeaders does, from the envelope already read rather
// than parsing the params once more.
func standardHeaders(h http.Header, env *envelope) error {
	method := mcp.MCPMethod(env.Method)
	switch got := h.Get(mcp.HeaderMethod); {
	case got == "":
		return mcp.HeaderMismatchError{Header: mcp.HeaderMethod, Reason: "missing required header"}
	case got != env.Method:
		return mcp.HeaderMismatchError{Header: mcp.HeaderMethod,
			Reason: fmt.Sprintf("header value %q does not match body value %q", got, env.Method)}
	case !mcp.MethodRequiresNameHeader(method):
		return nil
	}
	name := env.Params.Name
	if method == mcp.MethodResourcesRead {
		name = env.Params.URI
	}
	got, ok := mcp.DecodeHeaderValue(h.Get(mcp.HeaderName))
	switch {
	case h.Get(mcp.HeaderName) == "":
		return mcp.HeaderMismatchError{Header: mcp.HeaderName, Reason: fmt.Sprintf("missing required header for method %q", method)}
	case !ok:
		return mcp.HeaderMismatchError{Header: mcp.HeaderName, Reason: "invalid Base64 encoding"}
	case got != name:
		return mcp.HeaderMismatchError{Header: mcp.HeaderName,
			Reason: fmt.Sprintf("header value %q does not match body value %q", got, name)}
	}
	return nil
}

// writeRPCError answers a request with a JSON-RPC error and an HTTP status; id
// is written as given (see echoID and messageID).
func writeRPCError(w http.ResponseWriter, id json.RawMessage, code int, msg string, status int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(appendError(nil, id, code, msg))
}

// serveStateless serves a request of the stateless revision: a GET or DELETE
// (mcp-go answers 405: the revision has neither), subscriptions/listen (served
// here, see listen.go), or any other request, which mcp-go answers in a
// requestSession of ep's.
func (a *Agent) serveStateless(ctx context.Context, w http.ResponseWriter, r *http.Request, ep store.Endpoint, body []byte, env *envelope) {
	if r.Method != http.MethodPost {
		a.http.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	if !a.checkModern(w, r, body, env) {
		return
	}
	if env != nil && env.Method == string(mcp.MethodSubscriptionsListen) && !absent(env.ID) {
		a.serveListen(ctx, w, ep, messageID(env.ID), body)
		return
	}
	tools := a.endpointTools(ctx, ep)
	if env != nil && a.fastStateless(ctx, w, r, ep, body, env, tools) {
		return
	}
	a.http.ServeHTTP(w, r.WithContext(context.WithValue(ctx, statelessKey{}, tools)))
}

// fastStateless answers a stateless tools/call of a verb itself, as fastCall
// does one in a session and for the same reason (mcp-go spends several times
// what the verb does), and reports whether it did. The call runs the handler
// mcp-go would run, in a requestSession of the endpoint's, and its answer has
// the members mcp-go adds for the revision (resultHead). A call with a task or
// a multi-round-trip answer, or with a member given twice or unknown to this
// path (plainMembers), goes to mcp-go.
func (a *Agent) fastStateless(ctx context.Context, w http.ResponseWriter, r *http.Request, ep store.Endpoint, body []byte,
	env *envelope, t *builtTools) bool {
	if a.fastOff.Load() || env.JSONRPC != mcp.JSONRPC_VERSION || env.Method != string(mcp.MethodToolsCall) ||
		!plainID(env.ID) || !absent(env.Result) {
		return false
	}
	p := &env.Params.call
	if !absent(p.Task) || !absent(p.InputResponses) || !absent(p.RequestState) || !plainMembers(body) {
		return false
	}
	handler, isVerb := a.fast[p.Name]
	if _, listed := t.defs[p.Name]; !isVerb || !listed || !slices.Contains(ep.Verbs, a.verbOf[p.Name]) {
		return false
	}
	call := p.request(r.Header)
	a.runFast(a.mcp.WithContext(ctx, &requestSession{ClientSession: noSession{}, built: t}), w, env.ID, handler, call, a.head)
	return true
}

// noSession stands for mcp-go's session in a call fastStateless answers, where
// there is none: a verb asks only its id.
type noSession struct{}

func (noSession) Initialize()                                         {}
func (noSession) Initialized() bool                                   { return true }
func (noSession) NotificationChannel() chan<- mcp.JSONRPCNotification { return nil }
func (noSession) SessionID() string                                   { return "" }

type statelessKey struct{}

// inRequestSession is mcp-go's HTTP context function: a stateless request's
// session is replaced by a requestSession holding its endpoint's tools.
func (a *Agent) inRequestSession(ctx context.Context, _ *http.Request) context.Context {
	t, ok := ctx.Value(statelessKey{}).(*builtTools)
	cs := server.ClientSessionFromContext(ctx)
	if !ok || cs == nil {
		return ctx
	}
	return a.mcp.WithContext(ctx, &requestSession{ClientSession: cs, built: t})
}

// requestSession is the session of one stateless request: mcp-go's (its
// notification channel, which is the request's answer stream), with the tools of
// the request's endpoint. Setting tools on it is refused silently: nothing set on
// one request may outlive it.
type requestSession struct {
	server.ClientSession
	built *builtTools
}

func (s *requestSession) GetSessionTools() map[string]server.ServerTool { return s.built.tools }
func (s *requestSession) SetSessionTools(map[string]server.ServerTool)  {}

// builtTools are an endpoint's tools as its requests see them: the verbs it is
// granted, defined for it, and the tool sources' tools.
type builtTools struct {
	builtOn string
	defs    map[string]mcp.Tool
	tools   map[string]server.ServerTool
}

// toolCache keeps each endpoint's builtTools for its stateless requests, rebuilt
// when the endpoint's tool inputs change and dropped when RefreshSessions runs.
// gen counts the drops: tools built while one happened were read before it, and
// are used by their request but not kept.
type toolCache struct {
	mu  sync.Mutex
	all map[int64]*builtTools
	gen uint64
}

// endpointTools returns ep's tools for a stateless request.
func (a *Agent) endpointTools(ctx context.Context, ep store.Endpoint) *builtTools {
	var buf [256]byte // compared without a string of its own, on the stack
	on := appendToolInputs(buf[:0], ep)
	a.built.mu.Lock()
	t, gen := a.built.all[ep.ID], a.built.gen
	a.built.mu.Unlock()
	if t != nil && t.builtOn == string(on) {
		return t
	}
	t = &builtTools{builtOn: string(on), defs: a.verbDefs(ep), tools: a.sessionTools(ctx, ep)}
	a.built.mu.Lock()
	defer a.built.mu.Unlock()
	if a.built.gen != gen {
		return t
	}
	if a.built.all == nil {
		a.built.all = map[int64]*builtTools{}
	}
	a.built.all[ep.ID] = t
	return t
}

// forgetTools drops the cached tools of one endpoint (or of all, for id 0).
func (a *Agent) forgetTools(id int64) {
	a.built.mu.Lock()
	defer a.built.mu.Unlock()
	a.built.gen++
	if id == 0 {
		a.built.all = nil
		return
	}
	delete(a.built.all, id)
}

// discovered runs after mcp-go answers server/discover: the answer carries the
// endpoint's instructions (its lease contract), as initialize does for a session.
func (a *Agent) discovered(ctx context.Context, _ any, _ *mcp.DiscoverRequest, res *mcp.DiscoverResult) {
	if ep, ok := EndpointFromContext(ctx); ok && res != nil {
		res.Instructions = statelessInstructions(ep)
	}
}
