package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordingHandler keeps every record logged, with its attributes as text.
type recordingHandler struct {
	mu    *sync.Mutex
	lines *[]string
	attrs []slog.Attr
}

func newRecordingHandler() recordingHandler {
	return recordingHandler{mu: new(sync.Mutex), lines: new([]string)}
}

func (h recordingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h recordingHandler) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s", r.Level, r.Message)
	for _, a := range h.attrs {
		fmt.Fprintf(&b, " %s", a)
	}
	r.Attrs(func(a slog.Attr) bool { fmt.Fprintf(&b, " %s", a); return true })
	h.mu.Lock()
	*h.lines = append(*h.lines, b.String())
	h.mu.Unlock()
	return nil
}

func (h recordingHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.attrs = append(h.attrs[:len(h.attrs):len(h.attrs)], as...)
	return h
}

func (h recordingHandler) WithGroup(string) slog.Handler { return h }

func (h recordingHandler) all() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), *h.lines...)
}

// A client that posts JSON-RPC responses to requests the server never sent gets
// them refused; the log says so at WARN, a line a minute with the count, and
// without the session's id (which is the session's key).
func TestStrayResponsesAreLoggedRarelyAndWithoutTheSession(t *testing.T) {
	logs := newRecordingHandler()
	e := newEnv(t, func(c *envConfig) { c.agent.Logger = slog.New(logs) })
	_, cred := e.endpoint("worker", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	session := c.GetSessionId()
	post := func(n int) {
		resp, _ := e.raw("POST", cred, session, fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"error":{"code":-32603,"message":"no"}}`, n), nil)
		if resp.StatusCode < 400 {
			t.Fatalf("stray response %d: status %d, want it refused", n, resp.StatusCode)
		}
	}
	for n := range 500 {
		post(n)
	}
	e.clock.Add(time.Minute)
	post(500)

	var stray []string
	for _, l := range logs.all() {
		if strings.Contains(l, session) {
			t.Errorf("a log line names the session: %s", l)
		}
		if strings.HasPrefix(l, "ERROR") {
			t.Errorf("an ERROR line: %s", l)
		}
		if strings.Contains(l, "JSON-RPC response") {
			stray = append(stray, l)
		}
	}
	if len(stray) != 2 || !strings.HasPrefix(stray[0], "WARN ") || !strings.Contains(stray[0], "refused=1") ||
		!strings.Contains(stray[1], "refused=500") {
		t.Fatalf("log lines of 501 stray responses over a minute:\n%s\nwant 2 WARN lines, of 1 and then 500 refused", strings.Join(stray, "\n"))
	}
}
