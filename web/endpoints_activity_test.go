package web

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/mcpclient"
)

// The Endpoints page tells live sessions from idle ones: a session whose client
// went away without ending it (no DELETE) counts as idle once it has made no
// request for a minute and holds no stream, not as live until the agent's idle
// sweep ends it half an hour later.
func TestEndpointListTellsIdleSessions(t *testing.T) {
	f := newFixture(t, Options{})
	ag, err := agent.New(f.st, agent.Options{Logger: quietLog, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	router := httprouter.New()
	ag.Mount(router, "/mcp")
	mcpSrv := httptest.NewServer(router)
	t.Cleanup(mcpSrv.Close)
	t.Cleanup(ag.CloseSessions)
	f.ui.opts.Agents = ag
	ep, cred, err := f.st.CreateEndpoint(t.Context(), "worker", endpointSpec([]string{"inbox"}), "test")
	if err != nil {
		t.Fatal(err)
	}
	// Two workers: one whose client will vanish, one that keeps asking.
	gone, _, err := mcpclient.Dial(t.Context(), mcpSrv.URL+"/mcp", cred, mcpclient.DialOptions{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	_ = gone // never closed: its client went away without a DELETE
	busy, _, err := mcpclient.Dial(t.Context(), mcpSrv.URL+"/mcp", cred, mcpclient.DialOptions{Logger: quietLog})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { busy.Close() })
	cookie, _ := f.login()
	activity := func() string {
		t.Helper()
		_, body := f.get("/endpoints", cookie)
		start := strings.Index(body, fmt.Sprintf(`data-endpoint-id="%d"`, ep.ID))
		if start < 0 {
			t.Fatal("no row for the endpoint")
		}
		row := body[start:]
		row = row[strings.Index(row, `data-label="Activity"`):]
		return row[:strings.Index(row, "</td>")]
	}
	if got := activity(); !strings.Contains(got, ">2 live sessions") || strings.Contains(got, "idle") {
		t.Fatalf("just dialled: %q", got)
	}
	f.clock.Add(agent.IdleAfter)
	if err := busy.Ping(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := activity(); !strings.Contains(got, "1 live session · <span") || !strings.Contains(got, ">1 idle</span>") {
		t.Fatalf("a minute after the gone client's last request: %q", got)
	}
	f.clock.Add(agent.IdleAfter)
	if got := activity(); !strings.Contains(got, ">2 idle sessions</span>") || strings.Contains(got, "live") {
		t.Fatalf("a minute after every request: %q", got)
	}
}
