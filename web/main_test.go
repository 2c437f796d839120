package web

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/internal/testkit/teststore"
	"github.com/switchboardhq/switchboard/store"
)

// fixture is a board on a real SQLite file behind a real HTTP server, with one
// operator ("ana") already created.
type fixture struct {
	t     *testing.T
	st    *store.Store
	ui    *UI
	srv   *httptest.Server
	clock *testkit.Clock
	human store.Operator
}

const testPassword = "correct horse battery"

func newFixture(t *testing.T, opts Options) *fixture {
	t.Helper()
	clk := testkit.NewClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	st := teststore.Open(t, store.Options{Now: clk.Now, Synchronous: store.SyncNormal})
	h, err := st.CreateOperator(context.Background(), "ana", testPassword, "test")
	if err != nil {
		t.Fatal(err)
	}
	opts.Now = clk.Now
	if opts.Logger == nil {
		opts.Logger = quietLog
	}
	ui := New(st, opts)
	srv := httptest.NewServer(ui.Handler())
	t.Cleanup(func() {
		ui.Close()
		srv.Close()
	})
	return &fixture{t: t, st: st, ui: ui, srv: srv, clock: clk, human: h}
}

// login starts a session the way the login form would, without paying for bcrypt,
// and returns the session cookie and its CSRF token.
func (f *fixture) login() (cookie *http.Cookie, csrf string) {
	f.t.Helper()
	token, _, err := f.st.CreateWebSession(context.Background(), f.human.ID, time.Hour, "test", "")
	if err != nil {
		f.t.Fatal(err)
	}
	return &http.Cookie{Name: sessionCookie, Value: token}, csrfToken(token)
}

// do sends a request without following redirects.
func (f *fixture) do(method, path string, cookie *http.Cookie, form url.Values, hdr http.Header) *http.Response {
	f.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, f.srv.URL+path, body)
	if err != nil {
		f.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return res
}

// follow GETs where the redirect res points, with the session cookie and the
// cookies res set (a flash), as a browser would, and returns the page.
func (f *fixture) follow(res *http.Response, cookie *http.Cookie) string {
	f.t.Helper()
	req, err := http.NewRequest(http.MethodGet, f.srv.URL+res.Header.Get("Location"), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	req.AddCookie(cookie)
	for _, c := range res.Cookies() {
		req.AddCookie(c)
	}
	got, err := http.DefaultClient.Do(req)
	if err != nil {
		f.t.Fatal(err)
	}
	return readBody(f.t, got)
}

func (f *fixture) get(path string, cookie *http.Cookie) (*http.Response, string) {
	f.t.Helper()
	res := f.do(http.MethodGet, path, cookie, nil, nil)
	return res, readBody(f.t, res)
}

func (f *fixture) post(path string, cookie *http.Cookie, form url.Values) (*http.Response, string) {
	f.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	res := f.do(http.MethodPost, path, cookie, form, nil)
	return res, readBody(f.t, res)
}

func readBody(t *testing.T, res *http.Response) string {
	t.Helper()
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// addTodo puts a todo on a queue as the CLI would.
func (f *fixture) addTodo(queue, payload string) store.Todo {
	f.t.Helper()
	td, err := f.st.AddTodo(context.Background(), store.NewTodo{Queue: queue, Payload: payload, CreatedBy: "test"})
	if err != nil {
		f.t.Fatal(err)
	}
	return td
}

// claimed adds a todo and has agent:worker claim it.
func (f *fixture) claimed(queue string) store.Todo {
	f.t.Helper()
	td := f.addTodo(queue, `{"n":1}`)
	td, err := f.st.Claim(context.Background(), store.Ack{ID: td.ID, Owner: "agent:worker"}, time.Minute)
	if err != nil {
		f.t.Fatalf("claim: %v", err)
	}
	return td
}

// failed adds a todo and dead-letters it.
func (f *fixture) failed(queue string) store.Todo {
	f.t.Helper()
	td, err := f.st.AddTodo(context.Background(), store.NewTodo{Queue: queue, Payload: "x", MaxAttempts: 1, CreatedBy: "test"})
	if err != nil {
		f.t.Fatal(err)
	}
	if td, err = f.st.Claim(context.Background(), store.Ack{ID: td.ID, Owner: "agent:worker"}, time.Minute); err != nil {
		f.t.Fatalf("claim: %v", err)
	}
	if _, err := f.st.Fail(context.Background(), store.Ack{ID: td.ID, Owner: "agent:worker", LeaseSeq: td.LeaseSeq}, "boom", false); err != nil {
		f.t.Fatal(err)
	}
	return td
}

func (f *fixture) todo(id int64) store.Todo {
	f.t.Helper()
	td, err := f.st.Todo(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return td
}

// audited returns the audit rows for target, newest first.
func (f *fixture) audited(target string) []store.AuditEntry {
	f.t.Helper()
	rows, err := f.st.ListAudit(context.Background(), store.AuditFilter{Target: target})
	if err != nil {
		f.t.Fatal(err)
	}
	return rows
}

func newServerFor(t *testing.T, ui *UI) *httptest.Server {
	srv := httptest.NewServer(ui.Handler())
	t.Cleanup(srv.Close)
	return srv
}

var (
	quietLog      = slog.New(slog.DiscardHandler)
	storeAuditAll = store.AuditFilter{Limit: 1000}
	storeTodosAll = store.TodoFilter{Limit: 1000}
)

func endpointSpec(queues []string) store.EndpointSpec {
	verbs := []string{"claim_next", "complete"}
	return store.EndpointSpec{Queues: &queues, Verbs: &verbs}
}
