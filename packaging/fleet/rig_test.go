package fleet

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// fleet is two serve processes (a and b) on one PostgreSQL schema, an endpoint
// that may work queue "jobs", a generic webhook feeding it, and an operator.
type fleet struct {
	a, b         string // base URLs of the processes
	stopA        func()
	cred         string
	hookToken    string
	hookSecret   string
	user, passwd string
}

// startFleet starts the fleet; base is the public URL its ingest URLs and Host
// checks name (the load balancer's), or "" for each process's own.
func startFleet(t *testing.T, base string) *fleet {
	t.Helper()
	db := testkit.PostgresURL(t)
	ctx := context.Background()
	st, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	verbs, queues, sources := store.AllVerbs(), []string{"jobs"}, []string{"generic"}
	_, cred, err := st.CreateEndpoint(ctx, "worker", store.EndpointSpec{Verbs: &verbs, Queues: &queues,
		WebhookSources: &sources, WebhookQueues: &queues}, "system")
	if err != nil {
		t.Fatal(err)
	}
	h, err := st.CreateWebhook(ctx, store.NewWebhook{SourceType: "generic", Queue: "jobs", Secret: "s3cret-for-the-test",
		CreatedBy: "system"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateOperator(ctx, "ana", "a long enough password", "system"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	f := &fleet{cred: cred, hookToken: h.Token, hookSecret: "s3cret-for-the-test", user: "ana", passwd: "a long enough password"}
	f.a, _, f.stopA = servertest.Start(t, server.Config{DB: db, BaseURL: base, SessionRoute: "a"})
	f.b, _, _ = servertest.Start(t, server.Config{DB: db, BaseURL: base, SessionRoute: "b"})
	return f
}

// credWire adds the endpoint's credential to every request, and sends it to
// whatever address to holds now (the tests move a session between processes).
type credWire struct {
	cred string
	to   func() string
}

func (w credWire) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+w.cred)
	if w.to != nil {
		u, _ := url.Parse(w.to())
		r.URL.Scheme, r.URL.Host = u.Scheme, u.Host
	}
	return http.DefaultTransport.RoundTrip(r)
}

// session opens a Go SDK session of revision 2025-11-25 (which keeps sessions)
// at base, or at wherever to says when to is not nil.
func (f *fleet) session(t *testing.T, base string, to func() string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "fleet-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: credWire{f.cred, to}}}, &sdk.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// stateless opens a Go SDK client on 2026-07-28 at base: no session, no handshake.
func (f *fleet) stateless(t *testing.T, base string) *sdk.ClientSession {
	t.Helper()
	c := sdk.NewClient(&sdk.Implementation{Name: "fleet-test", Version: "1"}, nil)
	cs, err := c.Connect(context.Background(), &sdk.StreamableClientTransport{Endpoint: base + "/mcp",
		HTTPClient: &http.Client{Transport: credWire{cred: f.cred}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if v := cs.InitializeResult().ProtocolVersion; v != "2026-07-28" {
		t.Fatalf("the Go SDK negotiated %q, not the stateless 2026-07-28", v)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and says its error, a tool error among them.
func call(cs *sdk.ClientSession, tool string, args map[string]any) error {
	res, err := cs.CallTool(context.Background(), &sdk.CallToolParams{Name: tool, Arguments: args})
	if err == nil && res.IsError {
		err = errors.New(tool + " answered an error")
	}
	return err
}

// deliver posts one signed delivery through base and says its status.
func (f *fleet) deliver(t *testing.T, base, id string) int {
	t.Helper()
	return servertest.Deliver(t, base, f.hookToken, "generic", f.hookSecret, id, []byte(`{"id":"`+id+`"}`)).StatusCode
}

var loginToken = regexp.MustCompile(`name="login_token" value="([^"]+)"`)

// login signs the operator in at base and returns the browser (its cookie jar).
func (f *fleet) login(t *testing.T, base string) *http.Client {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar}
	resp, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	var page strings.Builder
	io.Copy(&page, resp.Body)
	resp.Body.Close()
	m := loginToken.FindStringSubmatch(page.String())
	if m == nil {
		t.Fatalf("the login page has no login_token:\n%.500s", page.String())
	}
	resp, err = c.PostForm(base+"/login", url.Values{"username": {f.user}, "password": {f.passwd}, "login_token": {m[1]}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("login at %s: %d", base, resp.StatusCode)
	}
	return c
}
