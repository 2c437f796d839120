package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/internal/cfaccess"
	"github.com/switchboardhq/switchboard/internal/httpbody"
	"github.com/switchboardhq/switchboard/internal/logevery"
	"github.com/switchboardhq/switchboard/store"
)

// SupportedProtocolVersions are the MCP revisions /mcp serves, newest first.
// 2026-07-28 keeps no session: each request is served alone, on its own
// credential (stateless.go), and the doorbell rides subscriptions/listen
// (listen.go). The others keep sessions: the doorbell rides a session's GET
// stream, and a session is bound to the credential that opened it.
var SupportedProtocolVersions = []string{
	mcp.ProtocolVersion20260728,
	mcp.ProtocolVersion20251125,
	mcp.ProtocolVersion20250618,
	mcp.ProtocolVersion20250326,
}

// SessionProtocolVersion is the newest revision /mcp serves that keeps sessions:
// what a client that holds one (the stdio bridge, bench's session path) asks for.
const SessionProtocolVersion = mcp.ProtocolVersion20251125

// Options configure New. The zero value is usable.
type Options struct {
	// BaseURL is the public URL of this server. Its origin is an allowed Origin,
	// and its host passes the DNS-rebinding check on loopback connections.
	BaseURL string
	// AllowedOrigins are further browser origins allowed to call /mcp.
	AllowedOrigins []string
	// Version is reported to clients as the server version.
	Version string
	// Logger receives diagnostics. Default slog.Default().
	Logger *slog.Logger
	// RatePerSecond and RateBurst are the tool-call rate limit of endpoints that
	// set none (default 50 per second, bursts of 100). It does not hold the
	// queue verbs (see limiters.allow).
	RatePerSecond float64
	RateBurst     int
	// DoorbellBuffer bounds rings waiting to be sent (default 1024); more are dropped.
	DoorbellBuffer int
	// MaxRequestBytes bounds a request body (default 1 MiB).
	MaxRequestBytes int64
	// BodyTimeout bounds how long a POST body may take to arrive (default
	// httpbody.DefaultTimeout); a slower one gets 408.
	BodyTimeout time.Duration
	// SessionIdleTTL ends sessions no request has used this long that hold no GET
	// stream (default 30 minutes); Run sweeps for them every quarter of it.
	SessionIdleTTL time.Duration
	// MaxSessionsPerEndpoint bounds the live sessions of one endpoint: opening
	// one more ends its least recently used (default 32). It bounds an
	// endpoint's subscriptions/listen streams too: one more ends the oldest.
	MaxSessionsPerEndpoint int
	// StreamPing is how often an open GET stream is pinged, which keeps proxies
	// from closing it and keeps its session from idling out (default 25 s).
	StreamPing time.Duration
	// RevalidateEvery is how often Run re-reads the endpoints of live sessions,
	// ending those of revoked endpoints (default 30 s).
	RevalidateEvery time.Duration
	// ToolSources add tools that are not verbs (module tools).
	ToolSources []ToolSource
	// ResourceMetadata, when set, is the URL of the OAuth protected resource
	// metadata a 401 names (package oauth); empty: OAuth is off.
	ResourceMetadata string
	// Now is the clock of sessions' requests, for the idle sweep and Activity
	// (default time.Now).
	Now func() time.Time
	// CFAccess, when set, lets a request without a bearer authenticate by its
	// Cloudflare Access assertion (see accessEndpoint).
	CFAccess *cfaccess.Verifier
	// SessionRoute, when set, goes into every session id this process mints
	// ("sb-ROUTE.…"), so that a load balancer in front of several processes can
	// send a session's requests to the process that holds it (see
	// packaging/fleet). Lower-case letters, digits and '-', at most 32.
	SessionRoute string
}

func (o *Options) defaults() {
	if o.Version == "" {
		o.Version = "dev"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.RatePerSecond <= 0 {
		o.RatePerSecond = 50
	}
	if o.RateBurst <= 0 {
		o.RateBurst = 100
	}
	if o.DoorbellBuffer <= 0 {
		o.DoorbellBuffer = 1024
	}
	if o.MaxRequestBytes <= 0 {
		o.MaxRequestBytes = 1 << 20
	}
	if o.BodyTimeout <= 0 {
		o.BodyTimeout = httpbody.DefaultTimeout
	}
	if o.SessionIdleTTL <= 0 {
		o.SessionIdleTTL = 30 * time.Minute
	}
	if o.MaxSessionsPerEndpoint <= 0 {
		o.MaxSessionsPerEndpoint = defaultMaxSessionsPerEndpoint
	}
	if o.StreamPing <= 0 {
		o.StreamPing = 25 * time.Second
	}
	if o.RevalidateEvery <= 0 {
		o.RevalidateEvery = 30 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// defaultMaxSessionsPerEndpoint: an agent holds one session per worker or
// conversation (the README's drain runs 8 workers on one endpoint), so 32 leaves it
// four times that, while a credential that initializes in a loop holds at most
// 32 tool lists (about 53 KB each, so under 2 MB) on a Raspberry Pi, not one per
// call for the 30 minutes until they idle out.
const defaultMaxSessionsPerEndpoint = 32

// Agent is the MCP endpoint for agents.
type Agent struct {
	st   *store.Store
	opts Options
	log  *slog.Logger

	mcp      *server.MCPServer
	http     *server.StreamableHTTPServer
	sessions *sessions
	limits   *limiters
	bell     *doorbell
	tools    []Tool
	verbOf   map[string]string // tool name → verb, for the filter

	built     toolCache // each endpoint's tools, for stateless requests
	listening listeners // open subscriptions/listen streams

	// fast holds the verbs' handlers, which fastCall runs itself; fastOff is set
	// only by tests that compare its answers with mcp-go's, and fastAnswered
	// counts the calls it answered.
	fast         map[string]server.ToolHandlerFunc
	fastOff      atomic.Bool
	fastAnswered atomic.Int64
	answers      sync.Pool   // *[]byte: the buffers runFast writes answers in
	head         *resultHead // what a stateless answer carries (fastStateless)

	origins   map[string]bool // allowed Origin values
	localHost string          // BaseURL's host, accepted on loopback connections

	// onAttach, when set (by tests), is called when a GET stream attaches.
	onAttach func(sessionID string)

	evictions logevery.Counter[int64]    // per endpoint
	failures  logevery.Counter[string]   // calls the server could not complete, per tool (a full disk fails them all)
	misrouted logevery.Counter[struct{}] // requests for the sessions of another process (routes are the client's to write: one key)
	seen      lastSeen                   // each endpoint's latest request, for Activity

	// accessRefusals counts refused Cloudflare Access requests, per reason and identity.
	accessRefusals logevery.Counter[string]

	recheck chan struct{} // EndpointsMayHaveChanged's signal to Run
}

// evictionLogEvery: a credential that initializes in a loop gets one log line per
// endpoint this often, with the count of sessions ended.
const evictionLogEvery = time.Minute

// New builds the agent endpoint on st and subscribes it to st's todo changes.
// Call it at wiring time, before traffic; serve its Handler and run Run.
func New(st *store.Store, opts Options) (*Agent, error) {
	opts.defaults()
	a := &Agent{
		st:      st,
		opts:    opts,
		log:     opts.Logger,
		limits:  newLimiters(opts.RatePerSecond, opts.RateBurst),
		bell:    newDoorbell(opts.DoorbellBuffer),
		verbOf:  map[string]string{},
		origins: map[string]bool{},
		recheck: make(chan struct{}, 1),
	}
	a.head = newResultHead(mcp.Implementation{Name: "switchboard", Version: opts.Version})
	a.evictions.Every = evictionLogEvery
	a.failures.Every = 10 * time.Second
	a.misrouted.Every = evictionLogEvery
	a.accessRefusals.Every = accessRefusedLogEvery
	a.sessions = newSessions(opts.MaxSessionsPerEndpoint, opts.Now, a.evict)
	if err := CheckSessionRoute(opts.SessionRoute); err != nil {
		return nil, fmt.Errorf("agent: %w", err)
	}
	a.sessions.prefix = SessionIDPrefix(opts.SessionRoute)
	a.sessions.idleNote = fmt.Sprintf("it was idle for %s", opts.SessionIdleTTL)
	if opts.BaseURL != "" {
		if err := ingest.CheckBaseURL(opts.BaseURL); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		u, _ := url.Parse(opts.BaseURL)
		a.origins[strings.ToLower(u.Scheme+"://"+u.Host)] = true
		a.localHost = strings.ToLower(u.Host)
	}
	for _, o := range opts.AllowedOrigins {
		if o = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(o), "/")); o != "" {
			a.origins[o] = true
		}
	}
	a.tools = a.table()
	for _, t := range a.tools {
		if _, dup := a.verbOf[t.Name]; dup {
			return nil, fmt.Errorf("agent: two tools are named %s", t.Name)
		}
		a.verbOf[t.Name] = t.Verb
	}

	hooks := &server.Hooks{}
	hooks.AddAfterInitialize(a.initialized)
	hooks.AddBeforeCallTool(noteCall)
	hooks.AddAfterDiscover(a.discovered)
	a.mcp = server.NewMCPServer("switchboard", opts.Version,
		server.WithInstructions(instructions(0)),
		server.WithToolCapabilities(true),
		server.WithExperimental(map[string]any{"claude/channel": map[string]any{}}),
		server.WithToolFilter(a.sessionView),
		server.WithHooks(hooks),
		server.WithRecovery(),
	)
	a.http = server.NewStreamableHTTPServer(a.mcp,
		server.WithSessionIdManagerResolver(a.sessions),
		server.WithStreamableHTTPProtocolVersions(SupportedProtocolVersions...),
		// The wrapper applies the same DNS-rebinding rule, plus the configured
		// public host, so a reverse proxy on the same machine keeps working.
		server.WithDisableLocalhostProtection(true),
		server.WithHeartbeatInterval(opts.StreamPing),
		server.WithStreamableHTTPLogger(transportLogger(opts.Logger, st.Now)),
		server.WithHTTPContextFunc(a.inRequestSession),
		// The agent reads each body itself, at most MaxRequestBytes, before
		// mcp-go does: its own bound (4 MiB) would refuse a larger one that
		// the fast path takes.
		server.WithMaxRequestBodyBytes(0),
	)
	verbs := a.verbTools()
	a.mcp.AddTools(verbs...)
	a.fast = make(map[string]server.ToolHandlerFunc, len(verbs))
	for _, v := range verbs {
		a.fast[v.Tool.Name] = v.Handler
	}
	st.OnTodoChange(a.bell.publish)
	return a, nil
}

// Mount serves the endpoint at path on r for GET, POST and DELETE, and the
// CORS preflight (OPTIONS) of a browser client.
func (a *Agent) Mount(r *httprouter.Router, path string) {
	h := a.Handler()
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		r.Handler(m, path, h)
	}
	r.Handler(http.MethodOptions, path, http.HandlerFunc(a.preflight))
}

// Run sends doorbell rings, ends idle sessions, and re-checks the endpoints of live
// sessions until ctx ends: every RevalidateEvery, and as soon as
// EndpointsMayHaveChanged says so and the endpoints' epoch confirms it.
func (a *Agent) Run(ctx context.Context) error {
	t := time.NewTicker(a.opts.RevalidateEvery)
	defer t.Stop()
	idle := time.NewTicker(max(a.opts.SessionIdleTTL/4, 10*time.Millisecond))
	defer idle.Stop()
	// No epoch is taken as seen when Run starts: sessions may have opened before
	// it, and their endpoints changed since; the first signal re-checks them.
	epoch := int64(-1)
	for {
		select {
		case <-ctx.Done():
			return nil
		case c := <-a.bell.ch:
			a.ring(c)
		case <-t.C:
			a.Revalidate(ctx)
		case <-idle.C:
			a.sweepIdle(a.opts.Now())
		case <-a.recheck:
			now, err := a.st.EndpointEpoch(ctx)
			if err != nil {
				a.log.Warn("read the endpoints' epoch", "err", err)
				continue
			}
			// The epoch moves on only once every session's endpoint was read:
			// after a failed read the next signal tries again.
			if now != epoch && a.Revalidate(ctx) {
				epoch = now
			}
		}
	}
}

// sweepIdle ends the sessions that no request has used for SessionIdleTTL and
// that hold no GET stream (whose heartbeats are its client's sign of life), as a
// DELETE would, and remembers why for their next request. A session is so ended
// between one and one and a quarter TTLs after its last request. (mcp-go has an
// idle sweep of its own, but it hears only the requests mcp-go answers, not those
// fastCall does.)
func (a *Agent) sweepIdle(now time.Time) {
	for _, x := range a.sessions.all() {
		if now.Sub(time.Unix(0, x.lastUsed.Load())) < a.opts.SessionIdleTTL || x.listening() {
			continue
		}
		a.sessions.noteEnded(x.id, a.sessions.idleNote)
		a.endSession(x.id)
	}
}

// EndpointsMayHaveChanged asks Run to re-check the live sessions if an endpoint
// changed: a revocation then ends its sessions, open streams included, at once
// rather than at the next RevalidateEvery. It never blocks; wire it to the
// store's foreign-commit watch, which sees every process's commits.
func (a *Agent) EndpointsMayHaveChanged() {
	select {
	case a.recheck <- struct{}{}:
	default:
	}
}

// CloseSessions ends every session's open stream, so that an HTTP server shutdown
// does not wait on them. Register it with http.Server.RegisterOnShutdown.
func (a *Agent) CloseSessions() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for _, x := range a.sessions.all() {
		x.closeStreams()
	}
	for _, l := range a.listening.list() {
		l.end("the server is shutting down; listen again")
	}
	if err := a.http.Shutdown(ctx); err != nil {
		a.log.Warn("close MCP sessions", "err", err)
	}
}

// initialized runs after mcp-go answers initialize and before the answer is
// written: it gives the new session its endpoint's tools and instructions, so the
// client can never list tools before they are there.
func (a *Agent) initialized(ctx context.Context, _ any, _ *mcp.InitializeRequest, res *mcp.InitializeResult) {
	ep, ok := EndpointFromContext(ctx)
	cs := server.ClientSessionFromContext(ctx)
	if !ok || cs == nil || res == nil {
		return
	}
	x := a.sessions.get(cs.SessionID())
	withTools, canTool := cs.(server.SessionWithTools)
	if x == nil || !canTool {
		return
	}
	res.Instructions = sessionInstructions(ep)
	x.mu.Lock()
	x.tools, x.defs, x.builtOn = withTools, a.verbDefs(ep), toolInputs(ep)
	x.mu.Unlock()
	withTools.SetSessionTools(a.sessionTools(ctx, ep))
}

// endSession ends a session as a DELETE does: mcp-go calls Terminate (which
// forgets it here and closes its streams), then drops its own state for it (its
// registration, tools, log level). mcp-go exports
// that only through a DELETE, so the agent sends it one.
func (a *Agent) endSession(id string) {
	r := &http.Request{Method: http.MethodDelete, URL: &url.URL{Path: "/mcp"}, Header: http.Header{}}
	r.Header.Set(server.HeaderKeySessionID, id)
	a.http.ServeHTTP(discard{http.Header{}}, r)
}

// evict ends a session sessions.add took from ep to keep it within the limit.
func (a *Agent) evict(ep store.Endpoint, x *session) {
	if n := a.evictions.Note(ep.ID, a.st.Now()); n > 0 {
		a.log.Warn("agent opened more MCP sessions than an endpoint may hold; its least recently used ones were ended",
			"agent", ep.AgentID, "max_sessions", a.opts.MaxSessionsPerEndpoint, "ended", n,
			"next_report_after", evictionLogEvery.String())
	}
	limit := fmt.Sprintf("%d sessions", a.opts.MaxSessionsPerEndpoint)
	if a.opts.MaxSessionsPerEndpoint == 1 {
		limit = "1 session"
	}
	a.sessions.noteEnded(x.id, fmt.Sprintf("its endpoint opened more than %s (--max-sessions-per-endpoint), "+
		"and this was the least recently used", limit))
	x.closeStreams()
	a.endSession(x.id)
}

// discard is the response writer of requests the agent itself sends mcp-go.
type discard struct{ h http.Header }

func (d discard) Header() http.Header       { return d.h }
func (discard) Write(b []byte) (int, error) { return len(b), nil }
func (discard) WriteHeader(int)             {}

// Stats are counters for metrics.
type Stats struct {
	Sessions     int   // live sessions
	Streams      int   // sessions with an open GET stream
	Listeners    int   // open subscriptions/listen streams (stateless revision)
	RingsSent    int64 // notifications handed to a session
	RingsDropped int64 // rings dropped because the doorbell queue was full
	RingsBlocked int64 // notifications dropped because a session's buffer was full
}

// Stats reports the endpoint's counters.
func (a *Agent) Stats() Stats {
	s := Stats{RingsSent: a.bell.sent.Load(), RingsDropped: a.bell.dropped.Load(), RingsBlocked: a.bell.blocked.Load(),
		Listeners: len(a.listening.list())}
	for _, x := range a.sessions.all() {
		s.Sessions++
		if x.listening() {
			s.Streams++
		}
	}
	return s
}
