package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/store"
)

// `switchboard connect` against a real serve: a stdio client's tool call goes
// through, and a doorbell rung by another process comes back on stdout, in the
// shape of a Claude Code channel event (content, and meta of strings).
func TestConnectRelaysCallsAndDoorbell(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	base, _ := startServer(t, server.Config{DB: db})
	ctx := context.Background()
	cli, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	queues := []string{"inbox"}
	verbs := []string{"claim_next", "list_todos"}
	_, cred, err := cli.CreateEndpoint(ctx, "bridged", store.EndpointSpec{Queues: &queues, Verbs: &verbs}, "human:1")
	if err != nil {
		t.Fatal(err)
	}

	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	env := &environ{stdin: inR, stdout: outW, stderr: io.Discard, getenv: func(k string) string {
		if k == "SWITCHBOARD_CREDENTIAL" {
			return cred
		}
		return ""
	}}
	done := make(chan int, 1)
	go func() { done <- run(cctx, env, []string{"connect", "--url", base + "/mcp"}) }()

	lines := make(chan map[string]any, 64)
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
		close(lines)
	}()
	send := func(v string) {
		if _, err := io.WriteString(inW, v+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	await := func(match func(map[string]any) bool, what string) map[string]any {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			select {
			case m, ok := <-lines:
				if !ok {
					t.Fatalf("stdout closed waiting for %s", what)
				}
				if match(m) {
					return m
				}
			case <-deadline:
				t.Fatalf("no %s on stdout", what)
			}
		}
	}
	byID := func(id float64) func(map[string]any) bool {
		return func(m map[string]any) bool { v, _ := m["id"].(float64); return v == id }
	}

	send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"experimental":{"claude/channel":{}}},"clientInfo":{"name":"stdio-agent","version":"1"}}}`)
	// Claude Code takes a stdio server as a channel when its initialize answer
	// declares experimental claude/channel.
	init := await(byID(1), "initialize result")
	res, _ := init["result"].(map[string]any)
	caps, _ := res["capabilities"].(map[string]any)
	if exp, _ := caps["experimental"].(map[string]any); exp == nil || exp["claude/channel"] == nil {
		t.Fatalf("initialize does not declare the claude/channel capability: %v", init)
	}
	send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"claim_next","arguments":{}}}`)
	m := await(byID(2), "claim_next result")
	if res, _ := m["result"].(map[string]any); res == nil || res["isError"] == true {
		t.Fatalf("claim_next through the bridge: %v", m)
	}
	// Give the bridge's GET stream a moment to attach, then add work from "the CLI".
	var rung map[string]any
	for attempt := 0; attempt < 5 && rung == nil; attempt++ {
		time.Sleep(300 * time.Millisecond)
		if _, err := cli.AddTodo(ctx, store.NewTodo{Queue: "inbox", Payload: "{}"}); err != nil {
			t.Fatal(err)
		}
		deadline := time.After(3 * time.Second)
	wait:
		for {
			select {
			case m := <-lines:
				if m["method"] == "notifications/claude/channel" {
					rung = m
					break wait
				}
			case <-deadline:
				break wait
			}
		}
	}
	if rung == nil {
		t.Fatal("no doorbell relayed to stdout")
	}
	params, _ := rung["params"].(map[string]any)
	if c, _ := params["content"].(string); !strings.Contains(c, "inbox") {
		t.Fatalf("doorbell content %q", c)
	}
	// A channel event's meta is a map of identifier keys to strings.
	meta, _ := params["meta"].(map[string]any)
	for _, k := range []string{"queue", "todo_id", "source"} {
		if _, ok := meta[k].(string); !ok {
			t.Fatalf("doorbell meta %v lacks the string %s", meta, k)
		}
	}
	inW.Close() // stdin EOF ends the bridge cleanly
	select {
	case code := <-done:
		if code != 0 {
			t.Fatalf("connect exited %d", code)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("connect did not exit on stdin EOF")
	}
}

func TestConnectNeedsCredentialFromEnvironment(t *testing.T) {
	code, _, stderr := cli(t, "", "connect", "--url", "http://127.0.0.1:1/mcp")
	if code != 2 || !strings.Contains(stderr, "SWITCHBOARD_CREDENTIAL") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = cli(t, "", "connect", "--url", "http://127.0.0.1:1/mcp", "sb_secret")
	if code != 2 || !strings.Contains(stderr, "never argv") {
		t.Fatalf("credential as an argument: exit %d, stderr %q", code, stderr)
	}
}
