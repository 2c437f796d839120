package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/internal/httpbody"
	"github.com/switchboardhq/switchboard/internal/rebinding"
	"github.com/switchboardhq/switchboard/store"
)

type endpointKey struct{}

// EndpointFromContext returns the endpoint a request authenticated as. Tool
// handlers, including those of a ToolSource, use it to find their caller.
func EndpointFromContext(ctx context.Context) (store.Endpoint, bool) {
	ep, ok := ctx.Value(endpointKey{}).(store.Endpoint)
	return ep, ok
}

// Handler is the /mcp handler: the checks below, then mcp-go's Streamable HTTP
// server. mcp-go's WithHTTPContextFunc cannot refuse a request, so the refusals
// live here, before mcp-go reads anything.
func (a *Agent) Handler() http.Handler {
	return http.HandlerFunc(a.serveHTTP)
}

func (a *Agent) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		httpbody.Guard(w, r) // a refusal below does not wait on the body
	}
	if !a.callerAllowed(w, r) {
		return
	}
	ep, ok := a.authenticate(w, r)
	if !ok {
		return
	}
	a.seen.note(ep.ID, a.opts.Now())
	ctx := context.WithValue(r.Context(), endpointKey{}, ep)

	var body []byte
	var env *envelope
	if r.Method == http.MethodPost {
		if body, ok = a.readBody(w, r); !ok {
			return
		}
		ctx = withCallNote(ctx)
		env = readEnvelope(r.Header, body)
		if env == nil && isBatch(r.Header, body) {
			writeRPCError(w, json.RawMessage("null"), mcp.INVALID_REQUEST, batchRefusal, http.StatusBadRequest)
			return
		}
		if nullIDRequest(r.Header, body, env) {
			// mcp-go takes it for a notification: answered 202, never done, its
			// client waiting for an answer that never comes.
			writeRPCError(w, json.RawMessage("null"), mcp.INVALID_REQUEST, nullIDRefusal, http.StatusBadRequest)
			return
		}
	}
	if isModern(r.Header, env) {
		w.Header().Set("X-Accel-Buffering", "no")
		a.serveStateless(ctx, w, r, ep, body, env)
		return
	}

	sid := r.Header.Get(server.HeaderKeySessionID)
	x, ok := a.sessionFor(w, r, ep, sid, body)
	if !ok {
		return
	}

	// A stream (the GET, or a POST answered with events) must not wait in a
	// reverse proxy's buffer: nginx holds it otherwise, and doorbells arrive late
	// and in bursts.
	w.Header().Set("X-Accel-Buffering", "no")
	switch {
	case r.Method == http.MethodGet:
		a.serveStream(ctx, w, r, x, sid)
	case x != nil:
		a.serveInSession(ctx, w, r, x, body, env)
	default:
		// An initialize (a POST without a session). mcp-go registers the new session
		// only after answering it: one ended before then (evicted by another
		// initialize of the same endpoint, or revoked) was registered after it ended,
		// and nothing else would ever unregister it, so it is ended again.
		var minted string
		a.http.ServeHTTP(w, r.WithContext(context.WithValue(ctx, mintedKey{}, &minted)))
		if minted != "" && a.sessions.get(minted) == nil {
			a.endSession(minted)
		}
	}
}

// callerAllowed refuses a request whose Host or Origin is not this server's. A
// request from an allowed origin is answered with the CORS headers its browser
// needs to read the answer.
func (a *Agent) callerAllowed(w http.ResponseWriter, r *http.Request) bool {
	// DNS-rebinding protection: mcp-go's rule, plus the host of the public URL
	// (a reverse proxy on the same machine forwards that one).
	if !rebinding.HostAllowed(r, a.localHost) {
		http.Error(w, "forbidden: Host header does not name this server", http.StatusForbidden)
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && !a.origins[strings.ToLower(o)] && !rebinding.SameListener(r, o) {
		http.Error(w, fmt.Sprintf("forbidden: Origin %.200q is not allowed (a browser client's origin goes in serve's --allowed-origins)", o),
			http.StatusForbidden)
		return false
	} else if o != "" {
		h := w.Header()
		h.Set("Access-Control-Allow-Origin", o)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", "Mcp-Session-Id, WWW-Authenticate")
	}
	return true
}

// preflight answers a browser's CORS preflight of a request to /mcp: from an
// allowed origin (callerAllowed), with the methods and headers an MCP client
// sends; from any other, 403. Without it a browser client whose origin is
// allowed still could not send its credential.
func (a *Agent) preflight(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Origin") == "" || !a.callerAllowed(w, r) {
		if r.Header.Get("Origin") == "" {
			w.Header().Set("Allow", "GET, POST, DELETE, OPTIONS")
			w.WriteHeader(http.StatusNoContent)
		}
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
	allow := "Authorization, Content-Type, Accept, Last-Event-ID, Mcp-Session-Id, Mcp-Protocol-Version, Mcp-Method, Mcp-Name"
	// A tool's x-mcp-header parameters travel in Mcp-Param-<name> headers, whose
	// names only the tool knows: those the browser asks for are allowed.
	for _, name := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
		name = strings.TrimSpace(name)
		if len(name) > len(mcp.HeaderParamPrefix) && len(name) <= 128 &&
			strings.EqualFold(name[:len(mcp.HeaderParamPrefix)], mcp.HeaderParamPrefix) && isToken(name) {
			allow += ", " + name
		}
	}
	h.Set("Access-Control-Allow-Headers", allow)
	h.Set("Access-Control-Max-Age", "3600")
	w.WriteHeader(http.StatusNoContent)
}

// isToken says whether s is made of HTTP's token characters (tchar), those of
// a header name and of an x-mcp-header value.
func isToken(s string) bool {
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#$%&'*+-.^_`|~") == ""
}

// sessionFor finds the live session sid of ep's (nil when sid is empty), or
// answers the request when there is none it may use.
func (a *Agent) sessionFor(w http.ResponseWriter, r *http.Request, ep store.Endpoint, sid string, body []byte) (*session, bool) {
	if sid == "" {
		if r.Method != http.MethodPost || needsSession(r.Header, body) {
			http.Error(w, "bad request: Mcp-Session-Id header required (only initialize starts a session)", http.StatusBadRequest)
			return nil, false
		}
		return nil, true
	}
	x := a.sessions.get(sid)
	switch {
	case x == nil:
		// 404 tells a client its session is gone and it must initialize again.
		a.sessionGone(w, sid)
		return nil, false
	case !x.heldBy(ep):
		a.log.Warn("request with another endpoint's session refused", "agent", ep.AgentID, "method", r.Method)
		http.Error(w, "forbidden: this session belongs to another credential", http.StatusForbidden)
		return nil, false
	}
	x.setEndpoint(ep)
	a.sessions.touch(x)
	return x, true
}

// serveStream serves the GET stream of session x, which rings its doorbells.
func (a *Agent) serveStream(ctx context.Context, w http.ResponseWriter, r *http.Request, x *session, sid string) {
	ctx, cancel := context.WithCancel(ctx)
	detach := x.attach(cancel)
	defer detach()
	// The session may have ended (revoked, evicted) between the lookup above
	// and the attach, after closing the streams it had: this one would never
	// be rung. Looked up again after attaching, it is either still there (and
	// a later end closes this stream) or gone.
	if a.sessions.get(sid) != x {
		a.sessionGone(w, sid)
		return
	}
	if a.onAttach != nil {
		a.onAttach(sid)
	}
	a.http.ServeHTTP(w, r.WithContext(ctx))
}

// serveInSession serves a request other than the GET on the live session x; a
// POST's message is env (see readEnvelope).
func (a *Agent) serveInSession(ctx context.Context, w http.ResponseWriter, r *http.Request, x *session, body []byte, env *envelope) {
	if r.Method != http.MethodPost {
		a.http.ServeHTTP(w, r.WithContext(ctx))
		return
	}
	if a.fastCall(ctx, w, r, x, body, env) {
		return
	}
	// A request mcp-go answers takes the notifications waiting for the
	// session (see fastCall): those sent before it began.
	notices, answered := x.notices.Load(), mcpAnswers(r.Header, env)
	a.http.ServeHTTP(w, r.WithContext(ctx))
	if answered {
		x.noteDrained(notices)
	}
}

// sessionGone answers a request on a session that is not live: 404, which tells
// a client to initialize again, with why it ended when that is remembered.
func (a *Agent) sessionGone(w http.ResponseWriter, sid string) {
	msg := "unknown or ended session: initialize a new one"
	route, routed := sessionRouteOf(sid)
	switch why := a.sessions.whyEnded(sid); {
	case why != "":
		msg = "session ended: " + why + "; initialize a new one"
	case routed && route != a.opts.SessionRoute:
		// Another process of a fleet opened it: the load balancer sent it here
		// because that process is down, or because it does not route by session.
		msg = fmt.Sprintf("session was opened by the process with session route %q, not this one (%q): "+
			"initialize a new one (a load balancer must send a session's requests to the process its id names, see docs/fleet.md)",
			route, a.opts.SessionRoute)
		// One count for every route: the id is the client's to write, and a
		// key per route would log, and be kept, once per made-up route.
		if n := a.misrouted.Note(struct{}{}, a.opts.Now()); n > 0 {
			a.log.Warn("requests for another process's sessions reached this one: is the load balancer routing by session route?",
				"session_route", route, "this_route", a.opts.SessionRoute, "requests", n)
		}
	}
	http.Error(w, msg, http.StatusNotFound)
}

// authenticate resolves the bearer credential (or a Cloudflare Access
// assertion, see accessEndpoint) to a live endpoint or answers 401.
func (a *Agent) authenticate(w http.ResponseWriter, r *http.Request) (store.Endpoint, bool) {
	if ep, ok, handled := a.accessEndpoint(w, r); handled {
		return ep, ok
	}
	scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	cred = strings.TrimSpace(cred)
	if !strings.EqualFold(scheme, "Bearer") || cred == "" {
		w.Header().Set("WWW-Authenticate", a.challenge(""))
		http.Error(w, "unauthorized: send Authorization: Bearer <credential>", http.StatusUnauthorized)
		return store.Endpoint{}, false
	}
	lookup := a.st.EndpointByCredential
	if strings.HasPrefix(cred, store.OAuthAccessPrefix) {
		if a.opts.ResourceMetadata == "" { // OAuth is off: the tokens it issued before are no credential
			w.Header().Set("WWW-Authenticate", a.challenge("invalid_token"))
			http.Error(w, "unauthorized: OAuth is off on this server (--oauth=false): send an endpoint credential", http.StatusUnauthorized)
			return store.Endpoint{}, false
		}
		lookup = a.st.EndpointByOAuthToken // a grant's token acts as its endpoint
	}
	ep, err := lookup(r.Context(), cred)
	switch {
	case errors.Is(err, store.ErrNotFound):
		w.Header().Set("WWW-Authenticate", a.challenge("invalid_token"))
		http.Error(w, "unauthorized: unknown or revoked credential", http.StatusUnauthorized)
		return store.Endpoint{}, false
	case err != nil:
		// Every request fails so while the database is away: the log says so
		// once in a while, with the count, as for tool calls.
		if n := a.failures.Note("authenticate", a.st.Now()); n > 0 {
			a.log.Error("authenticate agent", "err", err, "failed", n)
		}
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return store.Endpoint{}, false
	}
	return ep, true
}

// challenge is the WWW-Authenticate of a 401: with OAuth on, it names the
// protected resource metadata, where a client learns how to get a token.
func (a *Agent) challenge(errCode string) string {
	c := `Bearer realm="switchboard"`
	if a.opts.ResourceMetadata != "" {
		c += `, resource_metadata="` + a.opts.ResourceMetadata + `"`
	}
	if errCode != "" {
		c += `, error="` + errCode + `"`
	}
	return c
}

// needsSession reports whether a POST without a session is a call only a session
// may make: a request or notification of the session-ful revisions other than
// initialize. mcp-go would answer it 404, which tells a client that a session it
// never had has ended; the spec's answer is 400. The rest goes on to mcp-go: an
// initialize, a stateless request of a later revision (told which versions are
// served), a response, and a body that does not parse (its parse error).
func needsSession(h http.Header, body []byte) bool {
	if mcp.IsModernProtocol(h.Get(mcp.HeaderProtocolVersion)) {
		return false
	}
	var msg struct {
		Method mcp.MCPMethod `json:"method"`
		Params struct {
			Meta *mcp.Meta `json:"_meta"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) != nil || mcp.IsModernProtocol(msg.Params.Meta.ProtocolVersion()) {
		return false
	}
	return msg.Method != "" && msg.Method != mcp.MethodInitialize
}

// readBody reads a POST body within the bounds, before anything parses it, and
// puts it back for mcp-go. A larger body is answered 413, a slower one 408.
func (a *Agent) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, status := httpbody.Read(w, r, a.opts.MaxRequestBytes, a.opts.BodyTimeout)
	switch status {
	case 0:
		r.Body = io.NopCloser(bytes.NewReader(body))
		return body, true
	case http.StatusRequestEntityTooLarge:
		http.Error(w, "request body too large", status)
	case http.StatusRequestTimeout:
		http.Error(w, "request timeout: body not received in time", status)
	default:
		http.Error(w, "bad request: could not read body", status)
	}
	return nil, false
}

// batchRefusal answers a JSON-RPC batch, which mcp-go would call "not valid
// json": no revision served here takes one (2025-06-18 removed them).
const batchRefusal = "JSON-RPC batches are not supported: send each message in a request of its own"

// nullIDRefusal answers a request whose id is null, which MCP forbids.
const nullIDRefusal = "a request's id must be a string or an integer, not null (a notification has no id member)"

// nullIDRequest says whether a POST is a request (it has a method) whose id is
// null. It reads the body itself when the envelope could not (params it does not
// expect), as mcp-go then does.
func nullIDRequest(h http.Header, body []byte, env *envelope) bool {
	if env == nil {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if !jsonContent(h) || json.Unmarshal(body, &m) != nil {
			return false
		}
		env = &envelope{ID: m.ID, Method: m.Method}
	}
	return env.Method != "" && string(env.ID) == "null"
}

// isBatch says whether a POST's body is a JSON array of its Content-Type.
func isBatch(h http.Header, body []byte) bool {
	i := skipSpace(body, 0)
	return jsonContent(h) && i < len(body) && body[i] == '[' && json.Valid(body)
}
