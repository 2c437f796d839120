package bench

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// hangingServer answers an MCP session's setup but never a tools/call, and never
// a webhook delivery: a server that has stopped answering. It counts the calls
// that reached it.
func hangingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var calls atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodDelete:
		case strings.Contains(string(body), `"initialize"`):
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}`)
		case strings.Contains(string(body), `notifications/initialized`):
			w.WriteHeader(http.StatusAccepted)
		default:
			calls.Add(1)
			select {
			case <-r.Context().Done():
			case <-release:
			}
		}
	}))
	t.Cleanup(func() {
		close(release)
		srv.Close()
	})
	return srv, &calls
}

// An agent whose call outlasts the timeout stops at once, rather than wait out
// the call and then retry into the same silence; the drain reports the timeout.
func TestDrainStopsOnACallThatTimesOut(t *testing.T) {
	srv, calls := hangingServer(t)
	done := make(chan drained, 1)
	go func() {
		d, err := drainQueue(context.Background(), Target{URL: srv.URL, Credential: "cred", Queue: "q"}, 3, 100*time.Millisecond)
		if err != nil {
			t.Error(err)
		}
		done <- d
	}()
	var d drained
	select {
	case d = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the drain is still waiting on a server that does not answer")
	}
	if d.errs != 3 || calls.Load() != 3 {
		t.Fatalf("%d failed calls of %d made by 3 agents; want each agent to stop after its first", d.errs, calls.Load())
	}
	if d.done != 0 || !timedOut(d.lastErr) || !strings.Contains(d.failures(), "3 calls failed") {
		t.Fatalf("drained %d; failures: %s", d.done, d.failures())
	}
}

// A delivery that outlasts the timeout stops every sender, and sendAll says why;
// it does not go on sending into a server that has stopped answering.
func TestSendAllStopsOnADeliveryThatTimesOut(t *testing.T) {
	srv, calls := hangingServer(t)
	c := &http.Client{Timeout: 100 * time.Millisecond}
	hooks := []webhook{{source: "generic", url: srv.URL + "/webhooks/w/T", secret: "whsec_" + strings.Repeat("a", 32)}}
	var seq atomic.Int64
	var errs failures
	finished := make(chan error, 1)
	go func() {
		finished <- sendAll(context.Background(), c, hooks, Config{BodyBytes: 200}, 1000, 4, &seq, &Latencies{}, &errs, 0)
	}()
	select {
	case err := <-finished:
		if err == nil || !strings.Contains(err.Error(), "no answer within 100ms") {
			t.Fatalf("sendAll: %v, want a timeout that stopped the run", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the senders are still sending to a server that does not answer")
	}
	if n := calls.Load(); n > 8 {
		t.Fatalf("%d of 1000 deliveries were sent after the server stopped answering; want at most one more per sender", n)
	}
}

// The doorbell phase stops at a delivery that outlasts the timeout, rather than
// send the rest of its deliveries one by one into the same silence.
func TestDoorbellStopsOnADeliveryThatTimesOut(t *testing.T) {
	srv, calls := hangingServer(t)
	httpc := &http.Client{Timeout: 100 * time.Millisecond}
	hook := webhook{source: "generic", url: srv.URL + "/webhooks/w/T", secret: "whsec_" + strings.Repeat("a", 32)}
	var seq atomic.Int64
	finished := make(chan error, 1)
	go func() {
		finished <- doorbell(context.Background(), Target{URL: srv.URL, Credential: "cred"}, httpc, hook,
			Config{Agents: 1, Doorbells: 50, CallTimeout: 100 * time.Millisecond}, &seq, &Report{})
	}()
	select {
	case err := <-finished:
		if err == nil || !strings.Contains(err.Error(), "no answer within 100ms") {
			t.Fatalf("doorbell: %v, want a timeout that stopped the run", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the doorbell is still sending to a server that does not answer")
	}
	// One delivery, and perhaps the session's GET stream.
	if n := calls.Load(); n > 2 {
		t.Fatalf("%d calls reached the server; want the phase to stop at the first delivery that timed out", n)
	}
}
