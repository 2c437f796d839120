package bridge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"

	"github.com/switchboardhq/switchboard/internal/sse"
)

// Header names of the MCP Streamable HTTP transport.
const (
	headerSessionID       = "Mcp-Session-Id"
	headerProtocolVersion = "Mcp-Protocol-Version"
	headerLastEventID     = "Last-Event-ID"
	// metaProtocolVersion is where protocol versions from 2026-07-28 on carry
	// their version in every request instead of negotiating it once.
	metaProtocolVersion = "io.modelcontextprotocol/protocolVersion"
)

// relay is the state of one Run.
type relay struct {
	b    *Bridge
	log  *slog.Logger
	out  *lineWriter
	fail context.CancelCauseFunc
	slot chan struct{}

	mu          sync.Mutex
	sess        session
	initBody    []byte // the client's initialize, replayed to renew a lost session
	inflight    map[string]inflight
	lastEventID string
	stream      *streamControl
	rejected    bool // the credential was refused: don't bother with DELETE

	tools    toolCache // has its own lock
	renewMu  sync.Mutex
	requests sync.WaitGroup
}

type inflight struct {
	method string
	cancel context.CancelFunc
}

func newRelay(b *Bridge, out io.Writer, fail context.CancelCauseFunc) *relay {
	r := &relay{
		b:        b,
		log:      b.log,
		fail:     fail,
		slot:     make(chan struct{}, b.maxFlight),
		inflight: make(map[string]inflight),
	}
	r.out = &lineWriter{w: out, onError: func(err error) { fail(err) }}
	return r
}

// handle routes one line from stdin.
func (r *relay) handle(ctx context.Context, line []byte) {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return
	}
	msg, err := parseMessage(line)
	if err != nil {
		// Batches were removed from MCP in 2025-06-18: a JSON line that is not
		// an object is an Invalid Request, anything else a Parse error.
		code, why := -32700, "switchboard bridge: stdin line is not a JSON-RPC object"
		switch {
		case len(line) > 0 && line[0] == '[' && json.Valid(line):
			code, why = -32600, "switchboard bridge: stdin line is not a JSON-RPC object (batches are not supported: one message a line)"
		case json.Valid(line):
			code, why = -32600, "switchboard bridge: stdin line is not a JSON-RPC message (one object a line, its method a string)"
		}
		r.log.Warn("bridge: dropping a stdin line that is not a JSON-RPC object", "err", err)
		r.writeError(json.RawMessage("null"), code, why)
		return
	}
	if msg.Method != "" && bytes.Equal(compactJSON(msg.ID), []byte("null")) {
		// MCP forbids a null id. Relayed, it would go as a notification, and
		// its refusal would reach no one: the client would wait for ever.
		r.log.Warn("bridge: refusing a stdin request whose id is null", "method", msg.Method)
		r.writeError(msg.ID, -32600, "switchboard bridge: a request's id must be a string or an integer, not null (a notification has no id member)")
		return
	}
	switch {
	case msg.Method == "initialize":
		r.mu.Lock()
		r.initBody = line
		r.mu.Unlock()
		// In order: every later message needs the session this one creates.
		r.post(ctx, line, msg)
	case msg.isRequest():
		select {
		case r.slot <- struct{}{}:
		case <-ctx.Done():
			return
		}
		r.requests.Add(1)
		go func() {
			defer r.requests.Done()
			defer func() { <-r.slot }()
			r.post(ctx, line, msg)
		}()
	default:
		// Notifications and answers to server requests: in order, and quick
		// (the server acknowledges them with 202).
		accepted := r.post(ctx, line, msg)
		switch msg.Method {
		case "notifications/initialized":
			if accepted && r.session().id != "" {
				r.startStream(ctx)
			}
		case "notifications/cancelled":
			// The server has been told; also stop waiting for the answer.
			r.cancelInflight(msg.requestID)
		}
	}
}

// post relays one client message and writes the server's answer to stdout. It
// reports whether the server accepted the message.
func (r *relay) post(ctx context.Context, body []byte, msg message) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if msg.isRequest() {
		key := string(compactJSON(msg.ID))
		r.mu.Lock()
		r.inflight[key] = inflight{method: msg.Method, cancel: cancel}
		r.mu.Unlock()
		defer func() {
			r.mu.Lock()
			delete(r.inflight, key)
			r.mu.Unlock()
		}()
	}

	for renewed := false; ; renewed = true {
		s := r.session()
		req, err := r.newRequest(ctx, http.MethodPost, body, msg, s)
		if err != nil {
			r.replyError(msg, fmt.Sprintf("switchboard bridge: %v", err))
			return false
		}
		resp, err := r.b.client.Do(req)
		if err != nil {
			if ctx.Err() != nil {
				// Cancelled by the client, or the bridge is stopping: no one
				// waits for an answer (MCP: none is sent to a cancelled request).
				return false
			}
			r.log.Warn("bridge: cannot reach the server", "method", msg.Method, "err", err)
			r.replyError(msg, fmt.Sprintf("switchboard bridge: cannot reach the server: %v", err))
			return false
		}
		// The spec's answer to a 404 on a request that carried a session ID:
		// the server forgot the session (it restarted), so start a new one.
		if resp.StatusCode == http.StatusNotFound && s.id != "" && msg.version == "" && !renewed {
			if err := r.renewSession(ctx, s.id, whyGone(resp)); err != nil {
				r.replyError(msg, fmt.Sprintf("switchboard bridge: the session expired and a new one failed: %v", err))
				return false
			}
			continue
		}
		return r.consume(ctx, resp, msg)
	}
}

// consume writes the messages of one POST response to stdout.
func (r *relay) consume(ctx context.Context, resp *http.Response, msg message) bool {
	defer discard(resp)
	if resp.StatusCode == http.StatusUnauthorized {
		r.replyError(msg, "switchboard bridge: "+ErrUnauthorized.Error()+"; check the agent credential")
		r.reject(fmt.Errorf("bridge: %s: %w", msg.Method, ErrUnauthorized))
		return false
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, int64(r.b.maxBytes)))
		// From 2026-07-28 a JSON-RPC error comes with a matching HTTP status;
		// the client needs the server's own error (e.g. the versions it
		// supports), so relay it when there is one.
		if mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mediaType == "application/json" &&
			msg.isRequest() && answers(compactJSON(body), msg) {
			r.log.Debug("bridge: the server answered with an error", "method", msg.Method, "status", resp.StatusCode)
			r.emit(body, msg)
			return false
		}
		r.log.Warn("bridge: the server refused a message", "method", msg.Method, "status", resp.StatusCode)
		r.replyError(msg, fmt.Sprintf("switchboard bridge: the server answered HTTP %d: %s", resp.StatusCode, snippet(body)))
		return false
	}
	if msg.Method == "initialize" {
		r.mu.Lock()
		r.sess = session{id: resp.Header.Get(headerSessionID)}
		r.lastEventID = ""
		r.mu.Unlock()
	}

	answered := false
	err := r.eachMessage(resp, func(data []byte) {
		if r.emit(data, msg) {
			answered = true
		}
	})
	switch {
	case err != nil && ctx.Err() == nil:
		r.log.Warn("bridge: reading the answer failed", "method", msg.Method, "err", err)
		if !answered {
			r.replyError(msg, fmt.Sprintf("switchboard bridge: reading the answer failed: %v", err))
		}
	case err == nil && !answered && resp.StatusCode != http.StatusAccepted:
		// A 202 to a request means the answer comes on the notification stream.
		r.replyError(msg, "switchboard bridge: the server closed the response without answering")
	}
	return true
}

// eachMessage calls fn with each JSON-RPC message in a response body, which is
// either one JSON document or an SSE stream of them.
func (r *relay) eachMessage(resp *http.Response, fn func([]byte)) error {
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mediaType {
	case "text/event-stream":
		return sse.Read(resp.Body, r.b.maxBytes, func(ev sse.Event) error {
			if ev.Name == "" || ev.Name == "message" {
				fn(ev.Data)
			}
			return nil
		})
	case "application/json":
		data, err := io.ReadAll(io.LimitReader(resp.Body, int64(r.b.maxBytes)+1))
		if err != nil {
			return err
		}
		if len(data) > r.b.maxBytes {
			return fmt.Errorf("answer larger than %d bytes", r.b.maxBytes)
		}
		if len(bytes.TrimSpace(data)) > 0 {
			fn(data)
		}
	}
	return nil
}

// emit writes one server message to stdout as a single line and reports whether
// it answers the client request msg. The answer to initialize also tells the
// bridge the negotiated protocol version, which it must send from then on.
func (r *relay) emit(data []byte, msg message) bool {
	line := compactJSON(data)
	if line == nil {
		r.log.Warn("bridge: dropping a server message that is not JSON")
		return false
	}
	answered := msg.isRequest() && answers(line, msg)
	if answered {
		switch msg.Method {
		case "initialize":
			var a struct {
				Result struct {
					ProtocolVersion string `json:"protocolVersion"`
				} `json:"result"`
			}
			if json.Unmarshal(line, &a) == nil {
				r.mu.Lock()
				r.sess.version = a.Result.ProtocolVersion
				r.mu.Unlock()
			}
		case "tools/list":
			r.tools.learn(line)
		}
	}
	r.out.writeLine(line)
	return answered
}

// newRequest builds a request to the endpoint with the transport's headers.
func (r *relay) newRequest(ctx context.Context, method string, body []byte, msg message, s session) (*http.Request, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, r.b.url, rd)
	if err != nil {
		return nil, fmt.Errorf("build %s request: %w", method, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
	} else if method == http.MethodGet {
		req.Header.Set("Accept", "text/event-stream")
	}
	if r.b.credential != "" {
		req.Header.Set("Authorization", "Bearer "+r.b.credential)
	}
	if s.id != "" {
		req.Header.Set(headerSessionID, s.id)
	}
	// A message that names its protocol version (2026-07-28 on) must send the
	// same in the header; before that, every message after initialize sends the
	// version initialize negotiated.
	version := msg.version
	if version == "" && msg.Method != "initialize" {
		version = s.version
	}
	if version != "" {
		req.Header.Set(headerProtocolVersion, version)
	}
	if body != nil {
		r.tools.setStandardHeaders(req.Header, version, msg)
	}
	return req, nil
}

// snippet returns the start of an error body for a message to the client.
func snippet(body []byte) string {
	s := strings.TrimSpace(string(body[:min(len(body), 300)]))
	if s == "" {
		return "(no detail)"
	}
	return s
}

// whyGone reads the server's account of a 404 on a session (which it ended, or
// that another process of a fleet holds it), for the log, and closes the body.
func whyGone(resp *http.Response) string {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	discard(resp)
	return snippet(body)
}

// discard drains and closes a body so the connection can be reused.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64*1024))
	_ = resp.Body.Close()
}
