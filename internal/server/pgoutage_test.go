package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/switchboardhq/switchboard/internal/mcpclient"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// serve on PostgreSQL while the server stops and starts again: /readyz fails and
// deliveries get 503 while it is away (never a 2xx for a delivery not stored), and
// once it is back both work again without a restart of serve. The URL's password
// shows nowhere: not in the store's name, the log, /readyz or the board.
func TestServeOnPostgreSQLThroughARestart(t *testing.T) {
	c := testkit.StartCluster(t)
	var logs testkit.LockedBuffer
	base, srv, stop := servertest.Start(t, server.Config{DB: c.URL("postgres", c.Password, "postgres"),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	st := srv.Store()
	if strings.Contains(st.Path(), c.Password) {
		t.Fatalf("the store's name shows the password: %s", st.Path())
	}
	hook, err := st.CreateWebhook(ctx, store.NewWebhook{SourceType: "generic", Queue: "inbox",
		Secret: "s3cret-s3cret-s3cret", CreatedBy: "human:1"})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(id string) int {
		t.Helper()
		body := []byte(`{"delivery":"` + id + `"}`)
		return servertest.Deliver(t, base, hook.Token, "generic", "s3cret-s3cret-s3cret", id, body).StatusCode
	}
	readyz := func() (int, string) {
		t.Helper()
		code, body := servertest.Readyz(t, base)
		db, _ := body["database"].(string)
		if strings.Contains(db, c.Password) {
			t.Fatalf("/readyz shows the password: %q", db)
		}
		return code, db
	}

	queues, verbs := []string{"inbox"}, []string{"claim_next", "complete"}
	_, cred, err := st.CreateEndpoint(ctx, "worker", store.EndpointSpec{Queues: &queues, Verbs: &verbs}, "test")
	if err != nil {
		t.Fatal(err)
	}
	agent, _, err := mcpclient.Dial(ctx, base+"/mcp", cred, mcpclient.DialOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	claim := func() (*mcp.CallToolResult, error) {
		return agent.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: "claim_next",
			Arguments: map[string]any{"queue": "inbox"}}})
	}
	if code := deliver("before"); code != http.StatusAccepted {
		t.Fatalf("a delivery: %d", code)
	}
	if code, db := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz: %d %q", code, db)
	}

	c.Stop()
	if code, db := readyz(); code != http.StatusServiceUnavailable || !strings.Contains(db, fmt.Sprintf("PostgreSQL at 127.0.0.1:%d", c.Port)) ||
		!strings.Contains(db, "database unreachable") {
		t.Fatalf("/readyz with the server stopped: %d %q", code, db)
	}
	for _, id := range []string{"during-1", "during-2"} {
		if code := deliver(id); code != http.StatusServiceUnavailable {
			t.Fatalf("a delivery with the server stopped: %d, want 503", code)
		}
	}

	// The endpoint's credential cannot be checked: the call is refused as a whole
	// with 503, or answered with the code unavailable; never as unauthorized.
	if res, err := claim(); err != nil && !strings.Contains(err.Error(), "status 503") ||
		err == nil && (!res.IsError || !strings.Contains(fmt.Sprint(res.StructuredContent), "unavailable")) {
		t.Fatalf("claim_next with the server stopped: %+v, %v", res, err)
	}

	c.Start()
	if code, db := readyz(); code != http.StatusOK {
		t.Fatalf("/readyz after the restart: %d %q", code, db)
	}
	for _, id := range []string{"during-1", "after"} {
		if code := deliver(id); code != http.StatusAccepted {
			t.Fatalf("delivery %s after the restart: %d", id, code)
		}
	}
	if res, err := claim(); err != nil || res.IsError {
		t.Fatalf("claim_next after the restart: %+v, %v", res, err)
	}
	todos, err := st.ListTodos(ctx, store.TodoFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(todos) != 3 {
		t.Fatalf("%d todos after the restart, want 3 (before, during-1 sent again, after)", len(todos))
	}
	resp, err := http.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if strings.Contains(string(page), c.Password) {
		t.Fatal("the board's login page shows the password")
	}
	stop()
	if strings.Contains(logs.String(), c.Password) {
		t.Fatalf("the log shows the password:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "postgres://postgres@127.0.0.1") {
		t.Fatalf("the log never names the database:\n%s", logs.String())
	}
}
