package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/oauth"
)

func TestPagesRequireLogin(t *testing.T) {
	f := newFixture(t, Options{})
	td := f.addTodo("inbox", "{}")
	for _, path := range []string{"/", "/?queue=inbox", "/glance", fmt.Sprintf("/todos/%d", td.ID), "/endpoints",
		"/endpoints/new", "/audit", "/modules", "/webhooks", "/webhook/1", "/events/1"} {
		t.Run(path, func(t *testing.T) {
			res, _ := f.get(path, nil)
			if res.StatusCode != http.StatusSeeOther {
				t.Fatalf("status %d, want 303", res.StatusCode)
			}
			loc, _ := url.Parse(res.Header.Get("Location"))
			if loc.Path != "/login" || loc.Query().Get("next") != path {
				t.Fatalf("Location %q, want /login?next=%s", res.Header.Get("Location"), path)
			}
			// A stale or forged cookie is no better than none.
			res, _ = f.get(path, &http.Cookie{Name: sessionCookie, Value: "forged"})
			if res.StatusCode != http.StatusSeeOther {
				t.Fatalf("forged cookie: status %d, want 303", res.StatusCode)
			}
		})
	}
	// Script requests (live fragments, the event stream) get 401, not a redirect.
	for _, hdr := range []http.Header{{"X-Requested-With": {"fetch"}}, {"Accept": {"text/event-stream"}}} {
		res := f.do(http.MethodGet, "/live", nil, nil, hdr)
		res.Body.Close()
		if res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("background request %v: status %d, want 401", hdr, res.StatusCode)
		}
	}
}

func TestActionsRequireLogin(t *testing.T) {
	f := newFixture(t, Options{})
	td := f.claimed("inbox")
	res, _ := f.post(fmt.Sprintf("/todos/%d/release", td.ID), nil, url.Values{"csrf_token": {"x"}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login" {
		t.Fatalf("status %d Location %q, want 303 to /login", res.StatusCode, res.Header.Get("Location"))
	}
	if got := f.todo(td.ID).State; got != "claimed" {
		t.Fatalf("state %s after an unauthenticated release, want claimed", got)
	}
}

// TestCSRF: every state-changing route refuses a request without the session's
// token, and changes nothing.
func TestCSRF(t *testing.T) {
	f := newFixture(t, Options{Modules: &fakeModules{}})
	cookie, csrf := f.login()
	claimed := f.claimed("inbox")
	failed := f.failed("inbox")
	ep, _, err := f.st.CreateEndpoint(t.Context(), "bot", endpointSpec([]string{"inbox"}), "test")
	if err != nil {
		t.Fatal(err)
	}
	hook, events := f.webhookWithEvents(`{}`)
	other := otherCSRF(f)
	auditBefore := len(f.allAudit())
	todosBefore := f.countTodos()

	routes := []struct {
		path string
		form url.Values
	}{
		{fmt.Sprintf("/todos/%d/release", claimed.ID), nil},
		{fmt.Sprintf("/todos/%d/retry", failed.ID), nil},
		{"/todos", url.Values{"queue": {"inbox"}, "payload": {"{}"}}},
		{"/endpoints", url.Values{"agent_id": {"evil"}, "queues": {"inbox"}}},
		{fmt.Sprintf("/endpoints/%d", ep.ID), url.Values{"queues": {"other"}}},
		{fmt.Sprintf("/endpoints/%d/revoke", ep.ID), nil},
		{"/modules/everything/approve", url.Values{"tool": {"echo"}}},
		{fmt.Sprintf("/webhook/%d/delete", hook.ID), nil},
		{fmt.Sprintf("/events/%d/replay", events[0].EventID), nil},
		{"/logout", nil},
	}
	tokens := map[string]string{"missing": "", "wrong": "AAAA" + csrf[4:], "other session": other}
	for _, rt := range routes {
		for name, tok := range tokens {
			t.Run(rt.path+"/"+name, func(t *testing.T) {
				form := url.Values{}
				for k, v := range rt.form {
					form[k] = v
				}
				if tok != "" {
					form.Set(csrfField, tok)
				}
				res, body := f.post(rt.path, cookie, form)
				if res.StatusCode != http.StatusForbidden {
					t.Fatalf("status %d, want 403", res.StatusCode)
				}
				if !strings.Contains(body, "did not come from this board") {
					t.Fatalf("403 page does not explain itself:\n%s", body)
				}
			})
		}
	}
	if got := f.todo(claimed.ID).State; got != "claimed" {
		t.Errorf("claimed todo is %s", got)
	}
	if got := f.todo(failed.ID).State; got != "failed" {
		t.Errorf("failed todo is %s", got)
	}
	if got, err := f.st.Endpoint(t.Context(), ep.ID); err != nil || got.RevokedAt != nil || got.Queues[0] != "inbox" {
		t.Errorf("endpoint changed: %+v %v", got, err)
	}
	if _, _, err := f.st.WebhookByToken(t.Context(), hook.Token); err != nil {
		t.Errorf("webhook deleted without a CSRF token: %v", err)
	}
	if n := f.countTodos(); n != todosBefore {
		t.Errorf("todos: %d, want %d", n, todosBefore)
	}
	if n := len(f.allAudit()); n != auditBefore {
		t.Errorf("audit rows: %d, want %d (something was written)", n, auditBefore)
	}
	if fm := f.ui.opts.Modules.(*fakeModules); len(fm.approved) != 0 {
		t.Errorf("approved %v without a CSRF token", fm.approved)
	}
	// The session survived the forged logouts.
	if res, _ := f.get("/", cookie); res.StatusCode != http.StatusOK {
		t.Fatalf("session gone after forged logout: %d", res.StatusCode)
	}
	// The header form of the token works for script requests.
	res := f.do(http.MethodPost, fmt.Sprintf("/todos/%d/release", claimed.ID), cookie, url.Values{},
		http.Header{csrfHeader: {csrf}})
	res.Body.Close()
	if res.StatusCode != http.StatusSeeOther || f.todo(claimed.ID).State != "pending" {
		t.Fatalf("release with %s header: status %d state %s", csrfHeader, res.StatusCode, f.todo(claimed.ID).State)
	}
}

// otherCSRF is a valid token of a different session.
func otherCSRF(f *fixture) string {
	_, csrf := f.login()
	return csrf
}

func (f *fixture) allAudit() []string {
	rows, err := f.st.ListAudit(f.t.Context(), storeAuditAll)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, r := range rows {
		out = append(out, r.Actor+" "+r.Action+" "+r.Target)
	}
	return out
}

func (f *fixture) countTodos() int {
	todos, err := f.st.ListTodos(f.t.Context(), storeTodosAll)
	if err != nil {
		f.t.Fatal(err)
	}
	return len(todos)
}

func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	td := f.addTodo("inbox", "{}")
	css := f.ui.assets.url("app.css")
	for _, path := range []string{"/", "/login", fmt.Sprintf("/todos/%d", td.ID), "/endpoints", "/endpoints/new",
		"/audit", "/modules", "/webhooks", "/todos/999999", css} {
		t.Run(path, func(t *testing.T) {
			res, _ := f.get(path, cookie)
			h := res.Header
			csp := h.Get("Content-Security-Policy")
			for _, d := range []string{"default-src 'self'", "script-src 'self'", "style-src 'self'",
				"frame-ancestors 'none'", "base-uri 'none'", "form-action 'self'"} {
				if !strings.Contains(csp, d+";") && !strings.HasSuffix(csp, d) {
					t.Errorf("CSP %q lacks %q", csp, d)
				}
			}
			if strings.Contains(csp, "unsafe-inline") || strings.Contains(csp, "unsafe-eval") {
				t.Errorf("CSP allows inline code: %q", csp)
			}
			for k, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff",
				"Referrer-Policy": "same-origin"} {
				if got := h.Get(k); got != want {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestNoInlineScriptOrStyle(t *testing.T) {
	f := newFixture(t, Options{Modules: &fakeModules{status: sampleModules()}})
	cookie, _ := f.login()
	td := f.claimed("inbox")
	f.failed("inbox")
	if _, _, err := f.st.CreateEndpoint(t.Context(), "bot", endpointSpec([]string{"inbox"}), "test"); err != nil {
		t.Fatal(err)
	}
	h, ev := f.webhookWithEvents(`{"a":1}`)
	pages := []string{"/", fmt.Sprintf("/todos/%d", td.ID), "/endpoints", "/endpoints/1", "/endpoints/new", "/audit", "/modules",
		"/webhooks", fmt.Sprintf("/webhook/%d", h.ID), fmt.Sprintf("/events/%d", ev[0].EventID)}
	for _, path := range pages {
		res, body := f.get(path, cookie)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", path, res.StatusCode)
		}
		lower := strings.ToLower(body)
		for _, bad := range []string{" style=", "<style", "<script>", " onclick=", " onsubmit=", " onchange=", "javascript:"} {
			if strings.Contains(lower, bad) {
				t.Errorf("%s contains %q, which the CSP would block", path, bad)
			}
		}
	}
	res, body := f.get("/login", nil)
	if res.StatusCode != http.StatusOK || strings.Contains(strings.ToLower(body), " style=") {
		t.Fatalf("/login: %d or inline style", res.StatusCode)
	}
}

// Login throttling is keyed on the address the trusted proxy appended last,
// whichever header line it is on: a client's own X-Forwarded-For line, sent first,
// cannot choose the key.
func TestClientIPTakesTheProxysHop(t *testing.T) {
	for _, c := range []struct {
		trust bool
		lines []string
		want  string
	}{
		{false, []string{"203.0.113.5"}, "192.0.2.1"},
		{true, nil, "192.0.2.1"},
		{true, []string{"10.9.9.1, 203.0.113.5"}, "203.0.113.5"},
		{true, []string{"10.9.9.1", "203.0.113.5"}, "203.0.113.5"},
	} {
		u := &UI{opts: Options{TrustProxy: c.trust}}
		r := httptest.NewRequest("POST", "/login", nil)
		r.RemoteAddr = "192.0.2.1:4000"
		for _, l := range c.lines {
			r.Header.Add("X-Forwarded-For", l)
		}
		if got := u.clientIP(r); got != c.want {
			t.Errorf("trust %v, X-Forwarded-For %q: %s, want %s", c.trust, c.lines, got, c.want)
		}
	}
}

// TestDatabaseDownIsNotALogout: while the store cannot look a session up (the
// database is away), a signed-in browser is told so, 503 with Retry-After: not
// 401, on which the board's script reloads into the login page, nor a redirect
// to a login page that says the session ended. The login page answers 503 too.
func TestDatabaseDownIsNotALogout(t *testing.T) {
	f := newFixture(t, Options{})
	oa, err := oauth.New(f.st, oauth.Options{BaseURL: f.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	f.ui.opts.OAuth = oa
	cookie, csrf := f.login()
	if res, _ := f.get("/", cookie); res.StatusCode != http.StatusOK {
		t.Fatalf("the board before the outage: status %d", res.StatusCode)
	}
	f.st.Close() // every query fails, as while PostgreSQL is away

	down := func(name string, res *http.Response, wantBody string) {
		t.Helper()
		body := readBody(t, res)
		if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") == "" ||
			res.Header.Get("Location") != "" {
			t.Errorf("%s: status %d, Retry-After %q, Location %q, want 503 with Retry-After\n%s", name,
				res.StatusCode, res.Header.Get("Retry-After"), res.Header.Get("Location"), body)
			return
		}
		if !strings.Contains(body, wantBody) || strings.Contains(body, "session has ended") {
			t.Errorf("%s: body does not say %q:\n%s", name, wantBody, body)
		}
	}
	const page, plain = "The database is not answering", "the database is not answering; try again shortly"
	for _, path := range []string{"/", "/account", fmt.Sprintf("/todos/%d", 1), "/oauth/authorize?client_id=x"} {
		down("GET "+path, f.do(http.MethodGet, path, cookie, nil, nil), page)
	}
	for _, hdr := range []http.Header{{"X-Requested-With": {"fetch"}}, {"Accept": {"text/event-stream"}}} {
		down(fmt.Sprintf("GET /live %v", hdr), f.do(http.MethodGet, "/live", cookie, nil, hdr), plain)
		down(fmt.Sprintf("GET /glance %v", hdr), f.do(http.MethodGet, "/glance", cookie, nil, hdr), plain)
	}
	down("POST /todos", f.do(http.MethodPost, "/todos", cookie,
		url.Values{"csrf_token": {csrf}, "queue": {"inbox"}, "payload": {"{}"}}, nil), "nothing was done")
	down("GET /login with the session", f.do(http.MethodGet, "/login?next=%2F", cookie, nil, nil), page)
	down("GET /login without one", f.do(http.MethodGet, "/login", nil, nil, nil), page)
}
