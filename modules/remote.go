package modules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/internal/egress"
)

// A remote capability's transports: Streamable HTTP, and the HTTP+SSE of
// protocol versions before 2025-03-26.
const (
	transportStreamable = "streamable-http"
	transportSSE        = "sse"
)

// remoteReservedHeaders are headers the Streamable HTTP transport sets itself.
var remoteReservedHeaders = []string{"Accept", "Content-Type", "Content-Length", "Host", "Connection",
	"Transfer-Encoding", "Mcp-Session-Id", "Mcp-Protocol-Version", "Last-Event-Id"}

// decodeHeaders reads a remote manifest's headers: each value names the
// variable that holds it, never the value itself.
func (m *Manifest) decodeHeaders(raw map[string]json.RawMessage) error {
	if raw == nil {
		return nil
	}
	m.Headers = map[string]EnvRef{}
	for _, name := range slices.Sorted(maps.Keys(raw)) {
		dec := json.NewDecoder(bytes.NewReader(raw[name]))
		dec.DisallowUnknownFields()
		var ref EnvRef
		if firstByte(raw[name]) == '"' {
			return fieldErr(m.File, "headers."+name, `is given literally: it must name an environment variable, `+
				`{"env": "NAME", "prefix": "…"}; a manifest never holds a credential`)
		}
		if err := dec.Decode(&ref); err != nil {
			return fieldErr(m.File, "headers."+name, `must be {"env": "NAME", "prefix": "…"}: %v`, err)
		}
		m.Headers[name] = ref
	}
	return nil
}

// validateRemote checks a remote manifest's own fields.
func (m Manifest) validateRemote(lookup func(string) (string, bool)) error {
	if _, err := checkHTTPURL(m.URL); err != nil {
		return fieldErr(m.File, "url", "%v", err)
	}
	switch m.Transport {
	case "", transportStreamable, transportSSE:
	default:
		return fieldErr(m.File, "transport", "%q must be %s or %s", m.Transport, transportStreamable, transportSSE)
	}
	for _, name := range slices.Sorted(maps.Keys(m.Headers)) {
		field := "headers." + name
		if !headerPattern.MatchString(name) ||
			slices.ContainsFunc(remoteReservedHeaders, func(h string) bool { return strings.EqualFold(h, name) }) {
			return fieldErr(m.File, field, "%q must be a header name, not one the transport sets", name)
		}
		ref := m.Headers[name]
		if err := checkEnvName(ref.Env, lookup); err != nil {
			return fieldErr(m.File, field+".env", "%v", err)
		}
		if strings.ContainsAny(ref.Prefix, "\r\n\x00") {
			return fieldErr(m.File, field+".prefix", "holds a line break or NUL")
		}
	}
	return m.validateHTTPLimits()
}

// remoteConn is a remote capability's connection: one MCP session over
// Streamable HTTP, through a client held to the egress policy. When the
// server forgets the session (it restarted, or the session expired) a new one
// is opened at once and the call that met the refusal is made again; when the
// server cannot be reached the connection is dead, and the supervisor
// restarts it with backoff.
type remoteConn struct {
	man           Manifest
	client        *http.Client
	headers       map[string]string
	version       string
	onListChanged func()
	log           *slog.Logger

	mu       sync.Mutex // held while a new session opens
	sess     *session
	rejected string // the session ID the server last refused
	reopened string // the session ID reopen opened last

	// proven is the ID of a session the server has served since it opened
	// (a call answered, or its listening stream open): a server that refuses
	// the session it has just opened gets no other at once (see reopen).
	proven atomic.Value

	dead     chan struct{}
	deadOnce sync.Once
	reason   error
}

func openRemote(ctx context.Context, man Manifest, guard egress.Guard, lookup func(string) (string, bool),
	version string, onListChanged func(), log *slog.Logger) (*remoteConn, error) {
	c := &remoteConn{man: man, headers: map[string]string{}, version: version, onListChanged: onListChanged,
		log: log, dead: make(chan struct{})}
	for name, ref := range man.Headers {
		v, _ := lookup(ref.Env)
		c.headers[name] = ref.Prefix + v
	}
	c.client = egress.NewClient(&egress.Dialer{Guard: guard, Secret: slices.Collect(maps.Keys(man.Headers))}, 0)
	c.client.Transport = &sessionWatch{next: c.client.Transport, c: c}
	s, err := c.open(ctx)
	if err != nil {
		c.client.CloseIdleConnections()
		return nil, err
	}
	c.sess = s
	return c, nil
}

// open makes a new session with the server.
func (c *remoteConn) open(ctx context.Context) (*session, error) {
	var tr transport.Interface
	var err error
	logger := slog.New(warnHandler{c.log.Handler()})
	// mcp-go bounds each message it reads, 32 MiB by default; here at the answer
	// cap. Over Streamable HTTP an answer meets this package's cap (cappedBody)
	// first, and an event on the listening stream mcp-go's.
	if c.man.Transport == transportSSE {
		// The session is the event stream, which carries the answers too: when
		// it ends (the server lost it, or an event passed the cap), the
		// capability is restarted as when it is unreachable, and the calls
		// waiting for an answer fail at once.
		var sse *transport.SSE
		sse, err = transport.NewSSE(c.man.URL, transport.WithHTTPClient(c.client), transport.WithHeaders(c.headers),
			transport.WithSSELogger(logger), transport.WithMaxMessageBytes(maxRemoteAnswer))
		if err == nil {
			sse.SetConnectionLostHandler(func(err error) {
				if errors.Is(err, transport.ErrMessageTooLarge) {
					err = errAnswerCap
				}
				c.fail(fmt.Errorf("%w: the event stream ended: %v", ErrUnavailable, err))
				sse.Close()
			})
		}
		tr = sse
	} else {
		tr, err = transport.NewStreamableHTTP(c.man.URL, transport.WithHTTPBasicClient(c.client),
			transport.WithHTTPHeaders(c.headers), transport.WithContinuousListening(), transport.WithLogger(logger),
			transport.WithHTTPMaxMessageBytes(maxRemoteAnswer))
	}
	if err != nil {
		return nil, fmt.Errorf("url: %w", err)
	}
	s := newSession(tr, nil, false)
	// Over SSE the session has no id a refusal could name: a 400 may mean the
	// server lost it (mcp-go's own answers "Invalid session ID"), and the
	// capability is restarted.
	s.refusals = c.man.Transport != transportSSE
	if err := s.initialize(ctx, c.version, c.onListChanged, nil); err != nil {
		return nil, err
	}
	return s, nil
}

// current is the session in use.
func (c *remoteConn) current() *session {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sess
}

// refusedSession reports whether the server refused the session id.
func (c *remoteConn) refusedSession(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return id != "" && c.rejected == id
}

// reopen replaces old with a new session, unless that was done already.
func (c *remoteConn) reopen(ctx context.Context, old *session) (*session, error) {
	c.mu.Lock()
	if c.sess != old {
		defer c.mu.Unlock()
		return c.sess, nil
	}
	if err := c.brokenReason(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	if id := sessionID(old); id != "" && id == c.reopened && c.proven.Load() != id {
		// Opening sessions that the server refuses at once would go on for
		// as long as it does: the capability waits out a backoff instead.
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: the server refused the session it had just opened", ErrUnavailable)
	}
	s, err := c.open(ctx)
	if err != nil {
		c.mu.Unlock()
		return nil, err
	}
	c.sess = s
	c.reopened = sessionID(s)
	c.mu.Unlock()
	// Closed without the lock: closing sends a DELETE of the old session, whose
	// refusal (404) sessionWatch reports to lost, which takes the lock.
	old.close()
	c.log.Info("the remote server ended the session; a new one is open")
	go c.onListChanged() // its tools may have changed with its restart
	return s, nil
}

// sessionID is the ID the server gave s (both transports have one).
func sessionID(s *session) string {
	if t, ok := s.tr.(interface{ GetSessionId() string }); ok {
		return t.GetSessionId()
	}
	return ""
}

// lost is told by sessionWatch that the server refused session id.
func (c *remoteConn) lost(id string) {
	c.mu.Lock()
	fresh := c.rejected != id
	c.rejected = id
	s := c.sess
	c.mu.Unlock()
	if !fresh || s == nil || sessionID(s) != id {
		return
	}
	// Open the new session now, not at the next call: an idle capability's
	// listening stream would otherwise retry the dead one every second.
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.man.timeout())
		defer cancel()
		if _, err := c.reopen(ctx, s); err != nil {
			c.fail(fmt.Errorf("the server ended the session, and a new one failed: %w", err))
		}
	}()
}

// do runs fn on the session, again on a new one if the server refused the
// session, and marks the connection dead when the server cannot be reached.
func (c *remoteConn) do(ctx context.Context, fn func(*session) error) error {
	s := c.current()
	// Its ID now: a new session opened meanwhile (lost) closes s, which
	// forgets it, and fn then fails with the transport closed.
	id := sessionID(s)
	err := fn(s)
	if err != nil && ctx.Err() == nil && c.refusedSession(id) {
		ns, rerr := c.reopen(ctx, s)
		if rerr != nil {
			c.fail(rerr)
			return fmt.Errorf("%w: a new session: %v", ErrUnavailable, rerr)
		}
		s = ns
		err = fn(s)
	}
	if err == nil {
		c.proven.Store(sessionID(s))
	}
	if errors.Is(err, ErrUnavailable) && ctx.Err() == nil {
		c.fail(err)
	}
	return err
}

func (c *remoteConn) fail(err error) {
	c.deadOnce.Do(func() {
		c.reason = err
		close(c.dead)
	})
}

func (c *remoteConn) listTools(ctx context.Context) (tools []upstreamTool, refused []RefusedTool, names []string, nameless int, err error) {
	err = c.do(ctx, func(s *session) error {
		var e error
		tools, refused, names, nameless, e = s.listTools(ctx)
		return e
	})
	return tools, refused, names, nameless, err
}

func (c *remoteConn) callTool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	if c.man.Timeout != "" {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.man.timeout())
		defer cancel()
	}
	var res json.RawMessage
	err := c.do(ctx, func(s *session) error {
		var e error
		res, e = s.callTool(ctx, name, args)
		return e
	})
	return res, err
}

func (c *remoteConn) done() <-chan struct{} { return c.dead }

func (c *remoteConn) brokenReason() error {
	select {
	case <-c.dead:
		return c.reason
	default:
		return nil
	}
}

func (c *remoteConn) close() {
	c.fail(errors.New("closed"))
	if s := c.current(); s != nil {
		s.close()
	}
	c.client.CloseIdleConnections()
}

// sessionWatch sees every answer of the remote server. A 404 to a request
// that carried a session, or a 400 that says the session is not valid (what
// the official TypeScript SDK's example servers answer), means the server
// forgot it; a listening stream that cannot connect means it is down.
type sessionWatch struct {
	next http.RoundTripper
	c    *remoteConn
}

func (w *sessionWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := w.next.RoundTrip(req)
	id := req.Header.Get("Mcp-Session-Id")
	if err != nil {
		if req.Method == http.MethodGet && req.Context().Err() == nil {
			w.c.fail(fmt.Errorf("%w: %v", ErrUnavailable, err))
		}
		return resp, err
	}
	if req.Method == http.MethodPost {
		// One request's answer; the listening stream (GET) is endless by design.
		resp.Body = &cappedBody{ReadCloser: resp.Body, left: maxRemoteAnswer}
	}
	if id == "" {
		return resp, nil
	}
	if req.Method == http.MethodGet && resp.StatusCode/100 == 2 {
		w.c.proven.Store(id) // the session's listening stream is open
	}
	switch resp.StatusCode {
	case http.StatusNotFound:
		w.c.lost(id)
	case http.StatusBadRequest:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		if bytes.Contains(bytes.ToLower(body), []byte("session")) {
			w.c.lost(id)
		}
	}
	return resp, nil
}

// statusError matches the error mcp-go's Streamable HTTP transport returns for
// an answer with an error status whose body is not a JSON-RPC error.
var statusError = regexp.MustCompile(`^request failed with status (4\d\d): `)

// httpRefusal is, for a remote server's refusal of one request with a 4xx
// status other than 401, 403, 404, 407 and 410 (its credentials, session or
// address are wrong: the capability is), that request's own error, as a
// JSON-RPC error would be: the server is up, and the capability stays up. nil
// for any other error.
func httpRefusal(err error) error {
	m := statusError.FindStringSubmatch(err.Error())
	if m == nil || slices.Contains([]string{"401", "403", "404", "407", "410"}, m[1]) {
		return nil
	}
	return &RPCError{Code: mcp.INVALID_REQUEST, Message: "HTTP " + m[1] + ": " + strings.TrimSpace(err.Error()[len(m[0]):])}
}

// maxRemoteAnswer bounds the answer to one request to a remote server.
const maxRemoteAnswer = maxMaxResponse

// errAnswerCap ends the read of an answer over maxRemoteAnswer.
var errAnswerCap = fmt.Errorf("the remote server's answer is over the %d-byte cap", maxRemoteAnswer)

// cappedBody fails the read of a body once it passes its cap.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, errAnswerCap
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// warnHandler passes on the transport's warnings and errors, not its
// chatter about listening.
type warnHandler struct{ slog.Handler }

func (h warnHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}
