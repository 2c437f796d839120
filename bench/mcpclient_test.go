package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// A server that streams a notification ahead of the answer, and an answer whose
// payload mentions "method", must still yield the answer; a tool error and a
// JSON-RPC error must come back as errors.
func TestLeanClientAnswers(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer cred" {
			http.Error(w, "no", http.StatusUnauthorized)
			return
		}
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Method == http.MethodDelete:
			w.WriteHeader(http.StatusOK)
		case strings.Contains(string(body), `"initialize"`):
			w.Header().Set("Mcp-Session-Id", "s1")
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25"}}`)
		case strings.Contains(string(body), `notifications/initialized`):
			w.WriteHeader(http.StatusAccepted)
		case r.Header.Get("Mcp-Session-Id") != "s1" || r.Header.Get("Mcp-Protocol-Version") != "2025-11-25":
			http.Error(w, "bad session", http.StatusBadRequest)
		case strings.Contains(string(body), `"name":"streamed"`):
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"id\":2}}\n\n")
			// The answer on two data lines, which join with a newline.
			fmt.Fprint(w, "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\ndata: \"result\":{\"structuredContent\":{\"said\":\"\\\"method\\\"\"}}}\n\n")
		case strings.Contains(string(body), `"name":"fails"`):
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":3,"result":{"isError":true,"content":[{"type":"text","text":"not_found: todo 9"}]}}`)
		default:
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"jsonrpc":"2.0","id":4,"error":{"code":-32602,"message":"unknown tool"}}`)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	c, err := dialLean(ctx, Target{URL: srv.URL, Credential: "cred"}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()

	type said struct {
		Said string `json:"said"`
	}
	if got, err := leanCall[said](ctx, c, "streamed", map[string]any{}); err != nil || got.Said != `"method"` {
		t.Fatalf("streamed answer: %+v, %v", got, err)
	}
	var ce *callError
	if _, err := leanCall[said](ctx, c, "fails", map[string]any{}); !errors.As(err, &ce) || !strings.Contains(err.Error(), "not_found: todo 9") {
		t.Fatalf("tool error: %v", err)
	}
	if _, err := leanCall[said](ctx, c, "nope", map[string]any{}); !errors.As(err, &ce) || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("JSON-RPC error: %v", err)
	}

	if _, err := dialLean(ctx, Target{URL: srv.URL, Credential: "wrong"}, 5*time.Second); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("a refused credential: %v", err)
	}
}

// Deliveries go to the server bench was pointed at, under its prefix, whatever
// base URL the server advertises.
func TestIngestURL(t *testing.T) {
	for _, tc := range []struct{ base, advertised, want string }{
		{"http://127.0.0.1:18081", "http://127.0.0.1:8080/webhooks/w/T", "http://127.0.0.1:18081/webhooks/w/T"},
		{"https://h/sb/", "https://h/sb/webhooks/w/T", "https://h/sb/webhooks/w/T"},
		{"http://10.0.0.2:8080", "https://public.example/sb/webhooks/w/A%2FB", "http://10.0.0.2:8080/webhooks/w/A%2FB"},
	} {
		if got, err := ingestURL(tc.base, tc.advertised); err != nil || got != tc.want {
			t.Errorf("ingestURL(%q, %q) = %q, %v; want %q", tc.base, tc.advertised, got, err, tc.want)
		}
	}
	if _, err := ingestURL("http://h", "http://h/other"); err == nil {
		t.Error("an ingest URL without /webhooks/ was accepted")
	}
}
