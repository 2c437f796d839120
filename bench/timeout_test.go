package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// fakeTarget is a server that sets up MCP sessions and answers the bench's
// webhook bookkeeping (list_webhooks, create_webhook, delete_webhook), and
// otherwise behaves as hang says: a request for which hang returns true is never
// answered, as by a server that has stopped answering; any other tools/call gets
// a JSON-RPC error, and any other delivery a 202 without a todo. It counts the
// requests that were left hanging.
type fakeTarget struct {
	*httptest.Server
	hung atomic.Int64
}

func newFakeTarget(t *testing.T, hang func(r *http.Request, tool string) bool) *fakeTarget {
	f := &fakeTarget{}
	release := make(chan struct{})
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name            string `json:"name"`
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"params"`
		}
		body, _ := io.ReadAll(r.Body)
		json.Unmarshal(body, &msg)
		if hang(r, msg.Params.Name) {
			f.hung.Add(1)
			select {
			case <-r.Context().Done():
			case <-release:
			}
			return
		}
		answer := func(result string) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, msg.ID, result)
		}
		switch {
		case r.Method == http.MethodDelete || r.Method == http.MethodGet:
		case strings.HasPrefix(r.URL.Path, "/webhooks/"):
			w.WriteHeader(http.StatusAccepted)
		case msg.Method == "initialize":
			w.Header().Set("Mcp-Session-Id", "s1")
			answer(fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`,
				msg.Params.ProtocolVersion))
		case len(msg.ID) == 0: // a notification
			w.WriteHeader(http.StatusAccepted)
		case msg.Params.Name == "list_webhooks":
			answer(`{"content":[],"structuredContent":{"webhooks":[]}}`)
		case msg.Params.Name == "create_webhook":
			answer(fmt.Sprintf(`{"content":[],"structuredContent":{"ingest_url":%q,"signing_secret":%q}}`,
				f.URL+"/webhooks/w/T", testSecret))
		default:
			answer(`{"isError":true,"content":[{"type":"text","text":"not here"}]}`)
		}
	}))
	t.Cleanup(func() {
		close(release)
		f.Close()
	})
	return f
}

// testSecret signs the fake target's deliveries; it checks no signature.
var testSecret = "whsec_" + strings.Repeat("a", 32)

// hangsOnCalls leaves every tools/call and delivery unanswered.
func hangsOnCalls(r *http.Request, tool string) bool {
	return tool != "" || strings.HasPrefix(r.URL.Path, "/webhooks/")
}

// within runs fn and fails the test if it has not returned in 20 s: the bench
// would be waiting on a server that does not answer.
func within[T any](t *testing.T, what string, fn func() T) T {
	t.Helper()
	got := make(chan T, 1)
	go func() { got <- fn() }()
	select {
	case v := <-got:
		return v
	case <-time.After(20 * time.Second):
		t.Fatalf("%s is still waiting on a server that does not answer", what)
	}
	panic("unreachable")
}

// An agent whose call outlasts the timeout stops at once, rather than wait out
// the call and then retry into the same silence; the drain reports the timeout,
// and fails even when the todos it did complete add up to what was queued.
func TestDrainStopsOnACallThatTimesOut(t *testing.T) {
	f := newFakeTarget(t, hangsOnCalls)
	type result struct {
		d   drained
		err error
	}
	res := within(t, "the drain", func() result {
		d, err := drainQueue(context.Background(), Target{URL: f.URL, Credential: "cred", Queue: "q"}, 3, 500*time.Millisecond)
		return result{d, err}
	})
	d := res.d
	if res.err != nil {
		t.Fatal(res.err)
	}
	if d.errs != 3 || f.hung.Load() != 3 {
		t.Fatalf("%d failed calls of %d made by 3 agents; want each agent to stop after its first", d.errs, f.hung.Load())
	}
	if d.done != 0 || !timedOut(d.stalled) || !strings.Contains(d.failures(), "3 calls failed") {
		t.Fatalf("drained %d, stalled on %v; failures: %s", d.done, d.stalled, d.failures())
	}

	err := within(t, "the drain", func() error {
		return drain(context.Background(), Target{URL: f.URL, Credential: "cred", Queue: "q"}, 1, 500*time.Millisecond, 0, &Report{})
	})
	if err == nil || !strings.Contains(err.Error(), "no answer within 500ms") {
		t.Fatalf("drain with nothing queued and a call that timed out: %v, want the timeout", err)
	}
}

// One delivery that outlasts the timeout stops every sender at once, while the
// server answers all the others: sendAll says why, and sends no more.
func TestSendAllStopsOnADeliveryThatTimesOut(t *testing.T) {
	var first atomic.Bool
	f := newFakeTarget(t, func(r *http.Request, _ string) bool { return first.CompareAndSwap(false, true) })
	hooks := []webhook{{source: "generic", url: f.URL + "/webhooks/w/T", secret: testSecret}}
	var seq atomic.Int64
	var errs failures
	err := within(t, "sendAll", func() error {
		return sendAll(context.Background(), 200*time.Millisecond, hooks, nil, Config{BodyBytes: 200}, 1<<30, 2, &seq, &Latencies{}, &errs, 0)
	})
	if err == nil || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Fatalf("sendAll: %v, want a timeout that stopped the run", err)
	}
	if n := errs.n.Load(); n != 1 {
		t.Fatalf("%d deliveries counted as failed; want only the one that timed out", n)
	}
}

// The doorbell phase stops at a delivery that outlasts the timeout, rather than
// send the rest of its deliveries one by one into the same silence.
func TestDoorbellStopsOnADeliveryThatTimesOut(t *testing.T) {
	f := newFakeTarget(t, hangsOnCalls)
	httpc := &http.Client{Timeout: 200 * time.Millisecond}
	hook := webhook{source: "generic", url: f.URL + "/webhooks/w/T", secret: testSecret}
	var seq atomic.Int64
	err := within(t, "the doorbell", func() error {
		return doorbell(context.Background(), Target{URL: f.URL, Credential: "cred"}, httpc, hook,
			Config{Agents: 1, Doorbells: 50, CallTimeout: 200 * time.Millisecond}, &seq, &Report{})
	})
	if err == nil || !strings.Contains(err.Error(), "no answer within 200ms") {
		t.Fatalf("doorbell: %v, want a timeout that stopped the run", err)
	}
	if n := f.hung.Load(); n != 1 {
		t.Fatalf("%d deliveries were left unanswered; want the phase to stop at the first", n)
	}
}

// Run bounds every call it makes with Config.CallTimeout: the setup session's,
// the deliveries', and the handshake of a session that opens a GET stream.
func TestRunStopsOnACallThatTimesOut(t *testing.T) {
	for _, c := range []struct {
		name string
		hang func(r *http.Request, tool string) bool
		want string
	}{
		{"setup", func(_ *http.Request, tool string) bool { return tool == "list_webhooks" }, "list the target's webhooks"},
		{"ingest", func(r *http.Request, _ string) bool { return strings.HasPrefix(r.URL.Path, "/webhooks/") }, "bench: ingest: a delivery had no answer within 200ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeTarget(t, c.hang)
			err := within(t, "the run", func() error {
				_, err := Run(context.Background(), Target{URL: f.URL, Credential: "cred", Queue: "q"},
					Config{Deliveries: 100, Senders: 2, Agents: 1, CallTimeout: 200 * time.Millisecond})
				return err
			})
			if err == nil || !strings.Contains(err.Error(), c.want) || !timedOut(err) {
				t.Fatalf("Run: %v, want a timeout (%s)", err, c.want)
			}
		})
	}

	f := newFakeTarget(t, func(_ *http.Request, _ string) bool { return true })
	err := within(t, "a listening session's handshake", func() error {
		_, err := connect(context.Background(), Target{URL: f.URL, Credential: "cred"}, 200*time.Millisecond, func(mcp.JSONRPCNotification) {})
		return err
	})
	if err == nil || !timedOut(err) {
		t.Fatalf("connect with a GET stream to a server that never answers initialize: %v, want a timeout", err)
	}
}

// Deliveries the doorbell phase could not make are counted, and a phase where
// most failed stops the run rather than report the latency of the few (or of
// none).
func TestDoorbellStopsWhenItsDeliveriesFail(t *testing.T) {
	// The fake target answers deliveries 202 without a todo id: each fails.
	f := newFakeTarget(t, func(*http.Request, string) bool { return false })
	httpc := &http.Client{Timeout: 2 * time.Second}
	hook := webhook{source: "generic", url: f.URL + "/webhooks/w/T", secret: testSecret}
	var seq atomic.Int64
	r := &Report{}
	err := within(t, "the doorbell", func() error {
		return doorbell(context.Background(), Target{URL: f.URL, Credential: "cred"}, httpc, hook,
			Config{Agents: 1, Doorbells: 5, CallTimeout: 2 * time.Second}, &seq, r)
	})
	if err == nil || !strings.Contains(err.Error(), "5 of 5 deliveries failed") || r.Doorbell.Errors != 5 {
		t.Fatalf("doorbell: %v (%d errors), want it to stop on 5 of 5 failed", err, r.Doorbell.Errors)
	}
}

// An error answer's body goes into a one-line message: whitespace folded, a
// proxy's error page named by its title, a long body cut.
func TestOneLine(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"unknown session\n  initialize again\r\n", "unknown session initialize again"},
		{"<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>…</body></html>", `an HTML page titled "502 Bad Gateway"`},
		{"<!DOCTYPE html><p>down</p>", "an HTML page"},
		{strings.Repeat("é", 250), strings.Repeat("é", 200) + "…"},
	} {
		if got := oneLine([]byte(c.in)); got != c.want {
			t.Errorf("oneLine(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
