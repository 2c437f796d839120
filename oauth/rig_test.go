package oauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/internal/testkit/teststore"
	"github.com/switchboardhq/switchboard/oauth"
	"github.com/switchboardhq/switchboard/store"
	"github.com/switchboardhq/switchboard/web"
)

// rig is Switchboard's /mcp, board and authorization server on one real HTTP
// server and a real store, with a fake clock, an operator and an endpoint.
type rig struct {
	t        *testing.T
	st       *store.Store
	clock    *testkit.Clock
	srv      *httptest.Server
	base     string
	oauth    *oauth.Server
	agent    *agent.Agent
	human    store.Operator
	endpoint store.Endpoint
	session  *http.Cookie
	logs     *testkit.LockedBuffer
}

func newRig(t *testing.T, tweak func(*oauth.Options)) *rig {
	t.Helper()
	clk := testkit.NewClock(time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC))
	st := teststore.Open(t, store.Options{Now: clk.Now, Synchronous: store.SyncNormal})
	logs := &testkit.LockedBuffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv := httptest.NewUnstartedServer(nil)
	base := "http://" + srv.Listener.Addr().String()
	opts := oauth.Options{BaseURL: base, Registration: true, Logger: log}
	if tweak != nil {
		tweak(&opts)
	}
	oa, err := oauth.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := agent.New(st, agent.Options{BaseURL: base, ResourceMetadata: oa.ResourceMetadataURL(), Logger: log, Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go ag.Run(ctx)
	router := httprouter.New()
	ag.Mount(router, "/mcp")
	oa.Mount(router)
	ui := web.New(st, web.Options{OAuth: oa, Logger: log, Now: clk.Now})
	ui.Register(router)
	srv.Config.Handler = router
	srv.Start()
	t.Cleanup(func() {
		cancel()
		ag.CloseSessions()
		ui.Close()
		srv.Close()
		// No code or token reaches a log line, whatever the test did.
		for _, prefix := range []string{store.OAuthAccessPrefix, store.OAuthRefreshPrefix, store.OAuthCodePrefix} {
			if strings.Contains(logs.String(), prefix) {
				t.Errorf("a log line holds a %s… code or token", prefix)
			}
		}
	})
	h, err := st.CreateOperator(ctx, "ana", "correct horse battery", "test")
	if err != nil {
		t.Fatal(err)
	}
	ep, _, err := st.CreateEndpoint(ctx, "worker", store.EndpointSpec{Queues: &[]string{"jobs"}, Verbs: ptr(store.TodoVerbs())}, "test")
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := st.CreateWebSession(ctx, h.ID, time.Hour, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, st: st, clock: clk, srv: srv, base: base, oauth: oa, agent: ag, human: h, endpoint: ep, logs: logs,
		session: &http.Cookie{Name: "sb_session", Value: tok}}
}

// do sends a request, never following a redirect.
func (r *rig) do(method, path string, form url.Values, cookie *http.Cookie) (*http.Response, string) {
	r.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	if !strings.HasPrefix(path, "http") {
		path = r.base + path
	}
	req, err := http.NewRequest(method, path, body)
	if err != nil {
		r.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, string(b)
}

// register registers a client with one redirect URI and returns its id.
func (r *rig) register(redirect string) string {
	r.t.Helper()
	body := `{"client_name":"Test Agent","redirect_uris":["` + redirect + `"]}`
	res, err := http.Post(r.base+"/oauth/register", "application/json", strings.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	defer res.Body.Close()
	var got map[string]any
	_ = json.NewDecoder(res.Body).Decode(&got)
	if res.StatusCode != http.StatusCreated || got["client_id"] == "" {
		r.t.Fatalf("register: %d %v", res.StatusCode, got)
	}
	return got["client_id"].(string)
}

// pkce returns a verifier and its S256 challenge.
func pkce(seed string) (verifier, challenge string) {
	verifier = strings.Repeat(seed, 43/len(seed)+1)[:43]
	sum := sha256.Sum256([]byte(verifier))
	return verifier, base64.RawURLEncoding.EncodeToString(sum[:])
}

// authorizeQuery is a well-formed authorization request.
func (r *rig) authorizeQuery(clientID, redirect, challenge string) url.Values {
	return url.Values{"response_type": {"code"}, "client_id": {clientID}, "redirect_uri": {redirect},
		"code_challenge": {challenge}, "code_challenge_method": {"S256"}, "state": {"st-123"},
		"resource": {r.base + "/mcp"}}
}

var hiddenField = regexp.MustCompile(`<input type="hidden" name="([^"]+)" value="([^"]*)">`)

// consent GETs the consent page as the logged-in operator, then posts its form
// back with decision, as a browser would, and returns the answer.
func (r *rig) consent(q url.Values, decision string) (*http.Response, string) {
	r.t.Helper()
	res, page := r.do(http.MethodGet, "/oauth/authorize?"+q.Encode(), nil, r.session)
	if res.StatusCode != http.StatusOK {
		r.t.Fatalf("consent page: %d %s", res.StatusCode, page)
	}
	form := url.Values{}
	for _, m := range hiddenField.FindAllStringSubmatch(page, -1) {
		form.Set(m[1], html.UnescapeString(m[2]))
	}
	form.Set("decision", decision)
	form.Set("endpoint", itoa(r.endpoint.ID))
	return r.do(http.MethodPost, "/oauth/authorize", form, r.session)
}

// code runs the consent and returns the code from the redirect, checking
// state and iss on the way.
func (r *rig) code(q url.Values) string {
	r.t.Helper()
	res, body := r.consent(q, "allow")
	if res.StatusCode != http.StatusSeeOther {
		r.t.Fatalf("consent answered %d: %s", res.StatusCode, body)
	}
	to, err := url.Parse(res.Header.Get("Location"))
	if err != nil {
		r.t.Fatal(err)
	}
	if got := to.Query(); got.Get("state") != "st-123" || got.Get("iss") != r.base || got.Get("code") == "" {
		r.t.Fatalf("redirect %s lacks code, state or iss", to.Redacted())
	}
	return to.Query().Get("code")
}

// token posts to the token endpoint and returns its status and JSON.
func (r *rig) token(form url.Values) (int, map[string]any) {
	r.t.Helper()
	res, body := r.do(http.MethodPost, "/oauth/token", form, nil)
	var got map[string]any
	if err := json.Unmarshal([]byte(body), &got); err != nil {
		r.t.Fatalf("token answered %d, not JSON: %s", res.StatusCode, body)
	}
	return res.StatusCode, got
}

// mcpStatus sends an MCP ping with an Authorization header and returns the status.
func (r *rig) mcpStatus(bearer string) (int, http.Header) {
	r.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, r.base+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	return res.StatusCode, res.Header
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// logged is everything logged so far.
func (r *rig) logged() string { return r.logs.String() }

func ptr[T any](v T) *T { return &v }
