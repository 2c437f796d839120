package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"reflect"
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

// modernPost is what the HTTP wrapper read of a POST of the stateless revision.
// statelessVersion is the first revision without sessions.
const statelessVersion = mcp.ProtocolVersion20260728

type modernPost struct {
	ID     json.RawMessage
	Method mcp.MCPMethod
	Params json.RawMessage
}

// isModern says whether a request belongs to the stateless revision: its header
// or its message's _meta (env, nil for a message that is not JSON) names
// 2026-07-28 or later (mcp-go's rule; naming it in only one of the two is refused
// by checkModern).
func isModern(h http.Header, env *envelope) bool {
	if mcp.IsModernProtocol(h.Get(mcp.HeaderProtocolVersion)) {
		return true
	}
	if env == nil || absent(env.Params.Meta) {
		return false
	}
	var meta *mcp.Meta
	return json.Unmarshal(env.Params.Meta, &meta) == nil && mcp.IsModernProtocol(meta.ProtocolVersion())
}

// checkModern refuses, before anything is done, a stateless POST that the
// revision forbids: one that carries a session id, names its version in only one
// of header and _meta or two different ones, or whose Mcp-Method or Mcp-Name
// header differs from its body. It writes the refusal and reports false.
func (a *Agent) checkModern(w http.ResponseWriter, r *http.Request, body []byte) (modernPost, bool) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method mcp.MCPMethod   `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		writeRPCError(w, nil, mcp.PARSE_ERROR, "request body is not valid JSON", http.StatusBadRequest)
		return modernPost{}, false
	}
	var meta struct {
		Meta *mcp.Meta `json:"_meta"`
	}
	_ = json.Unmarshal(msg.Params, &meta)
	header, inBody := r.Header.Get(mcp.HeaderProtocolVersion), meta.Meta.ProtocolVersion()
	fail := func(code int, text string) (modernPost, bool) {
		writeRPCError(w, msg.ID, code, text, http.StatusBadRequest)
		return modernPost{}, false
	}
	switch {
	case r.Header.Get(server.HeaderKeySessionID) != "":
		return fail(mcp.INVALID_REQUEST, "Mcp-Session-Id is not part of protocol version "+mcp.ProtocolVersion20260728+
			": its requests keep no session; send none")
	case header == "":
		return fail(mcp.HEADER_MISMATCH, mcp.HeaderProtocolVersion+" header is required for requests carrying "+mcp.MetaKeyProtocolVersion)
	case inBody == "":
		return fail(mcp.INVALID_PARAMS, "missing or invalid _meta field "+mcp.MetaKeyProtocolVersion)
	case header != inBody:
		return fail(mcp.HEADER_MISMATCH, mcp.HeaderProtocolVersion+" header "+strconv.Quote(header)+
			" does not match request "+mcp.MetaKeyProtocolVersion+" "+strconv.Quote(inBody))
	}
	if msg.Method != "" {
		if err := mcp.ValidateStandardHeaders(r.Header.Get, inBody, msg.Method, msg.Params); err != nil {
			return fail(mcp.HEADER_MISMATCH, err.Error())
		}
	}
	return modernPost{ID: msg.ID, Method: msg.Method, Params: msg.Params}, true
}

// writeRPCError answers a request with a JSON-RPC error and an HTTP status.
func writeRPCError(w http.ResponseWriter, id json.RawMessage, code int, msg string, status int) {
	if len(bytes.TrimSpace(id)) == 0 {
		id = json.RawMessage("null")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(appendError(nil, id, code, msg))
}

// serveStateless serves a request of the stateless revision: a GET or DELETE
// (mcp-go answers 405: the revision has neither), subscriptions/listen (served
// here, see listen.go), or any other request, which mcp-go answers in a
// requestSession of ep's.
func (a *Agent) serveStateless(ctx context.Context, w http.ResponseWriter, r *http.Request, ep store.Endpoint, body []byte) {
	if r.Method != http.MethodPost {
		a.http.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	req, ok := a.checkModern(w, r, body)
	if !ok {
		return
	}
	if req.Method == mcp.MethodSubscriptionsListen && len(req.ID) > 0 {
		a.serveListen(ctx, w, r, ep, req)
		return
	}
	tools := a.endpointTools(ctx, ep)
	if a.fastStateless(ctx, w, r, ep, body, req, tools) {
		return
	}
	a.http.ServeHTTP(w, r.WithContext(context.WithValue(ctx, statelessKey{}, tools)))
}

// fastStateless answers a stateless tools/call of a verb itself, as fastCall
// does one in a session and for the same reason (mcp-go spends several times
// what the verb does), and reports whether it did. The call runs the handler
// mcp-go would run, in a requestSession of the endpoint's, and its answer has
// the members mcp-go adds for the revision (resultHead). A call with a task or
// a multi-round-trip answer goes to mcp-go.
func (a *Agent) fastStateless(ctx context.Context, w http.ResponseWriter, r *http.Request, ep store.Endpoint, body []byte,
	req modernPost, t *builtTools) bool {
	if a.fastOff.Load() || req.Method != mcp.MethodToolsCall || !plainID(req.ID) {
		return false
	}
	var call mcp.CallToolRequest
	if json.Unmarshal(body, &call) != nil || call.Params.Task != nil || !reflect.ValueOf(call.Params.MultiRoundTripParams).IsZero() {
		return false
	}
	handler, isVerb := a.fast[call.Params.Name]
	if _, listed := t.defs[call.Params.Name]; !isVerb || !listed || !slices.Contains(ep.Verbs, a.verbOf[call.Params.Name]) {
		return false
	}
	call.Header = r.Header
	a.runFast(a.mcp.WithContext(ctx, &requestSession{ClientSession: noSession{}, built: t}), w, req.ID, handler, call, a.head)
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
type toolCache struct {
	mu  sync.Mutex
	all map[int64]*builtTools
}

// endpointTools returns ep's tools for a stateless request.
func (a *Agent) endpointTools(ctx context.Context, ep store.Endpoint) *builtTools {
	on := toolInputs(ep)
	a.built.mu.Lock()
	t := a.built.all[ep.ID]
	a.built.mu.Unlock()
	if t != nil && t.builtOn == on {
		return t
	}
	t = &builtTools{builtOn: on, defs: a.verbDefs(ep), tools: a.sessionTools(ctx, ep)}
	a.built.mu.Lock()
	if a.built.all == nil {
		a.built.all = map[int64]*builtTools{}
	}
	a.built.all[ep.ID] = t
	a.built.mu.Unlock()
	return t
}

// forgetTools drops the cached tools of one endpoint (or of all, for id 0).
func (a *Agent) forgetTools(id int64) {
	a.built.mu.Lock()
	defer a.built.mu.Unlock()
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
