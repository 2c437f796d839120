package modules

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// TestRemoteCredentialEchoedIsRedacted: a remote server that echoes the
// credential it was sent, in a tool's answer, in a refused call's body and in
// the error that takes it down, hands it to no agent, log or status.
func TestRemoteCredentialEchoedIsRedacted(t *testing.T) {
	rs := newRemoteServer(t)
	rs.mcp.AddTool(mcp.NewTool("whoami", mcp.WithDescription("Says what it was sent.")),
		func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("you sent " + req.Header.Get("Authorization")), nil
		})
	var logs testkit.LockedBuffer
	h := newHarness(t, []Manifest{remoteManifest("remote", "http://"+rs.addr+"/mcp")}, func(o *Options) {
		o.EgressPolicy = restPolicy
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	h.start()
	leaks := func(what, text string) {
		t.Helper()
		if strings.Contains(text, testToken) {
			t.Errorf("%s carries the credential: %s", what, text)
		}
	}

	raw, err := h.sup.Call(context.Background(), "remote_whoami", []byte(`{}`))
	if err != nil || !strings.Contains(string(raw), "you sent "+redactedMark) {
		t.Fatalf("whoami answered %s, %v; want the credential redacted", raw, err)
	}
	leaks("a tool's answer", string(raw))

	rs.onCall(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		io.WriteString(w, "bad request from "+r.Header.Get("Authorization"))
	})
	_, err = h.sup.Call(context.Background(), "remote_greet", []byte(`{"name":"x"}`))
	var rpc *RPCError
	if !errors.As(err, &rpc) || !strings.Contains(rpc.Message, "bad request from "+redactedMark) {
		t.Fatalf("a refused call failed with %v; want its own error, the credential redacted", err)
	}
	leaks("a refused call's error", err.Error())
	leaks("a refused call's message", rpc.Message)

	rs.onCall(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down, and you sent "+r.Header.Get("Authorization"), http.StatusServiceUnavailable)
	})
	if _, err = h.sup.Call(context.Background(), "remote_greet", []byte(`{"name":"x"}`)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("a 503 failed the call with %v; want unavailable", err)
	}
	leaks("the failed call's error", err.Error())
	h.poll("the capability down with its reason", func() bool {
		return strings.Contains(h.status("remote").LastError, "you sent")
	})
	leaks("the status", h.status("remote").LastError)
	h.poll("the log of it", func() bool { return strings.Contains(logs.String(), "you sent") })
	leaks("the log", logs.String())
}

// TestRemoteRefusedStreamLogIsRedacted: a server that refuses the listening
// stream, quoting the credential, has the transport log its answer: redacted.
// (The server refuses it from the start: cutting the connections of a running
// capability to make the stream connect again could fail a request in flight,
// which takes the capability down.)
func TestRemoteRefusedStreamLogIsRedacted(t *testing.T) {
	rs := newRemoteServer(t)
	real := rs.handler.Load()
	rs.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.Error(w, "no stream for "+r.Header.Get("Authorization"), http.StatusServiceUnavailable)
			return
		}
		real.ServeHTTP(w, r)
	})
	var logs testkit.LockedBuffer
	h := newHarness(t, []Manifest{remoteManifest("remote", "http://"+rs.addr+"/mcp")}, func(o *Options) {
		o.EgressPolicy = restPolicy
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	h.start()
	h.poll("the transport's log of the refused stream", func() bool { return strings.Contains(logs.String(), "no stream for") })
	if strings.Contains(logs.String(), testToken) {
		t.Errorf("the log carries the credential: %s", logs.String())
	}
}

// TestRESTCredentialEchoedIsRedacted: an API whose error page quotes the
// request's headers hands the credential to no agent.
func TestRESTCredentialEchoedIsRedacted(t *testing.T) {
	api := restAPI(t)
	m := restManifest(api.URL + "/v1")
	m["auth"] = map[string]any{"type": "header", "header": "X-Api-Key", "env": "EXAMPLE_API_KEY"}
	m["operations"] = append(m["operations"].([]any), map[string]any{"name": "echo_fail", "description": "Fails.",
		"method": "GET", "path": "/echo_fail", "inputSchema": map[string]any{"type": "object"},
		"annotations": map[string]any{"readOnlyHint": true, "destructiveHint": false}})
	h := restHarness(t, loadREST(t, m), nil)
	res := h.restCall("pets_echo_fail", nil)
	text := res.Content[0].Text
	if !res.IsError || !strings.Contains(text, "HTTP 500") || !strings.Contains(text, "key="+redactedMark) {
		t.Fatalf("answered %+v; want the error, the credential redacted", res)
	}
	if strings.Contains(text, "api-key-canary") {
		t.Errorf("the error carries the credential: %s", text)
	}
}
