package agent

import (
	"maps"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/internal/cfaccess"
	"github.com/switchboardhq/switchboard/internal/cfaccess/cfaccesstest"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// accessEnv is an env whose /mcp accepts the assertions of a test team.
type accessEnv struct {
	*env
	team   *cfaccesstest.Team
	key    *cfaccesstest.Key
	vclock *testkit.Clock // the verifier's clock
}

func newAccessEnv(t *testing.T) *accessEnv {
	team, key := cfaccesstest.NewTeam(t)
	vclock := testkit.NewClock(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	e := newEnv(t, func(c *envConfig) { c.agent.CFAccess = team.Verifier(t, vclock.Now) })
	return &accessEnv{env: e, team: team, key: key, vclock: vclock}
}

// assertion is a valid assertion of identity (an email) signed with k.
func (a *accessEnv) assertion(k *cfaccesstest.Key, identity string) string {
	return k.Sign(a.t, cfaccesstest.Claims(identity, a.vclock.Now()))
}

// accessClient connects a real MCP client that sends an assertion and no bearer.
// Its results are not checked against the listed outputSchemas (that check
// lists tools with a bearer); they are the endpoint's whichever way it came in.
func (a *accessEnv) accessClient(assertion, version string) (*agentClient, error) {
	tr, err := transport.NewStreamableHTTP(a.url, transport.WithHTTPHeaders(map[string]string{cfaccess.Header: assertion}))
	if err != nil {
		return nil, err
	}
	c := client.NewClient(tr, client.WithProtocolVersion(version))
	if err := c.Start(a.t.Context()); err != nil {
		return nil, err
	}
	a.t.Cleanup(func() { c.Close() })
	_, err = c.Initialize(a.t.Context(), mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: version, ClientInfo: mcp.Implementation{Name: "behind-access", Version: "1"}}})
	return &agentClient{Client: c, notes: make(chan mcp.JSONRPCNotification, 1), unchecked: true}, err
}

// A request through Cloudflare Access acts as the endpoint that answers for its
// identity, with that endpoint's scope only, over both kinds of revision: it
// drains its queue and cannot touch another's. A session it opened is bound to
// that endpoint. After the team rotates its key, a new assertion verifies once
// the key set is fetched again, and one under the withdrawn key is refused.
func TestCloudflareAccessDrainsWithItsEndpointsScope(t *testing.T) {
	a := newAccessEnv(t)
	ana := "Ana@Example.com"
	a.endpoint("ana", []string{"inbox"}, nil, func(s *store.EndpointSpec) { s.CFAccessIdentity = &ana })
	_, otherCred := a.endpoint("other", []string{"secret"}, nil)
	secret := a.addTodo("secret", `{"s":1}`)

	for _, version := range []string{mcp.ProtocolVersion20260728, mcp.ProtocolVersion20251125} {
		ac, err := a.accessClient(a.assertion(a.key, "ana@example.com"), version)
		if err != nil {
			t.Fatalf("%s: connect through Access: %v", version, err)
		}
		td := a.addTodo("inbox", `{"pr":42}`)
		var claimed struct {
			Todo struct {
				ID       int64 `json:"id"`
				LeaseSeq int64 `json:"lease_seq"`
			} `json:"todo"`
		}
		ac.ok(t, VerbClaimNext, nil, &claimed)
		if claimed.Todo.ID != td.ID {
			t.Fatalf("%s: claimed %+v, want todo %d", version, claimed, td.ID)
		}
		ac.ok(t, VerbComplete, map[string]any{"todo_id": td.ID, "lease_seq": claimed.Todo.LeaseSeq, "result": "ok"}, nil)
		if got := a.todo(td.ID); got.State != store.StateDone || got.Owner != "agent:ana" || !strings.Contains(got.Result, "ok") {
			t.Fatalf("%s: after complete: %+v", version, got)
		}
		// Another endpoint's todo is not there for it; its queue is refused.
		if code := ac.code(t, VerbClaim, map[string]any{"todo_id": secret.ID}); code != CodeNotFound {
			t.Fatalf("%s: claim of another endpoint's todo: %q, want not_found", version, code)
		}
		if code := ac.code(t, VerbListTodos, map[string]any{"queue": "secret"}); code != CodeForbidden {
			t.Fatalf("%s: list of another endpoint's queue: %q, want forbidden", version, code)
		}
		if version == mcp.ProtocolVersion20251125 {
			resp, _ := a.raw(http.MethodPost, otherCred, ac.GetSessionId(), listToolsBody, nil)
			if resp.StatusCode != http.StatusForbidden {
				t.Fatalf("another endpoint's bearer on the Access session: %d, want 403", resp.StatusCode)
			}
		}
	}
	if got := a.todo(secret.ID); got.State != store.StatePending {
		t.Fatalf("the other endpoint's todo: %+v, want untouched", got)
	}
	done, err := a.st.ListAudit(t.Context(), store.AuditFilter{Actor: "agent:ana", Action: "todo.complete"})
	if err != nil || len(done) != 2 {
		t.Fatalf("audit rows of ana's completions: %d (%v), want 2", len(done), err)
	}

	// The rotation.
	fresh := cfaccesstest.NewKey(t)
	a.team.Serve(fresh)
	a.vclock.Add(time.Minute)
	if _, err := a.accessClient(a.assertion(fresh, "ana@example.com"), mcp.ProtocolVersion20260728); err != nil {
		t.Fatalf("an assertion under the new key: %v", err)
	}
	if resp, _ := a.accessRaw(a.assertion(a.key, "ana@example.com"), initializeBody); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an assertion under the withdrawn key: %d, want 401", resp.StatusCode)
	}
}

// accessRaw posts body with an assertion and no bearer.
func (a *accessEnv) accessRaw(assertion, body string) (*http.Response, string) {
	return a.raw(http.MethodPost, "", "", body, map[string]string{cfaccess.Header: assertion})
}

// Each assertion that must not verify, or that names no live endpoint, is a 401
// and does nothing: the todo stays pending, no session opens. A bearer still
// works beside any assertion; without Access configured, an assertion alone is
// no credential.
func TestCloudflareAccessRefusals(t *testing.T) {
	a := newAccessEnv(t)
	ana := "ana@example.com"
	_, cred := a.endpoint("ana", []string{"inbox"}, nil, func(s *store.EndpointSpec) { s.CFAccessIdentity = &ana })
	gone := "gone@example.com"
	revoked, _ := a.endpoint("gone", []string{"inbox"}, nil, func(s *store.EndpointSpec) { s.CFAccessIdentity = &gone })
	if err := a.st.RevokeEndpoint(t.Context(), revoked.ID, "human:test"); err != nil {
		t.Fatal(err)
	}
	td := a.addTodo("inbox", `{"pr":1}`)
	now := a.vclock.Now()
	claims := func(change func(map[string]any)) map[string]any {
		c := cfaccesstest.Claims(ana, now)
		change(c)
		return c
	}
	stranger := cfaccesstest.NewKey(t)
	claimNext := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"claim_next","arguments":{},` +
		`"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"2026-07-28","` + mcp.MetaKeyClientCapabilities + `":{}}}}`

	for name, assertion := range map[string]string{
		"expired":          a.key.Sign(t, claims(func(c map[string]any) { c["exp"] = now.Add(-2 * time.Minute).Unix() })),
		"not valid yet":    a.key.Sign(t, claims(func(c map[string]any) { c["nbf"] = now.Add(2 * time.Minute).Unix() })),
		"issued in future": a.key.Sign(t, claims(func(c map[string]any) { c["iat"] = now.Add(2 * time.Minute).Unix() })),
		"wrongly signed":   cfaccesstest.SignWith(t, jose.RS256, stranger.Priv, a.key.ID, claims(func(map[string]any) {})),
		"wrong aud":        a.key.Sign(t, claims(func(c map[string]any) { c["aud"] = []string{"another-app"} })),
		"wrong iss":        a.key.Sign(t, claims(func(c map[string]any) { c["iss"] = "https://evil.cloudflareaccess.com" })),
		"unknown identity": a.key.Sign(t, claims(func(c map[string]any) { c["email"] = "mallory@example.com" })),
		"revoked endpoint": a.key.Sign(t, claims(func(c map[string]any) { c["email"] = gone })),
		"HS256 public key": a.key.ForgeHS256(t, claims(func(map[string]any) {})),
		"alg none":         cfaccesstest.Unsigned(t, a.key.ID, claims(func(map[string]any) {})),
	} {
		for _, body := range []string{initializeBody, claimNext} {
			resp, text := a.accessRaw(assertion, body)
			if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Mcp-Session-Id") != "" {
				t.Errorf("%s: %d %q (session %q), want 401", name, resp.StatusCode, text, resp.Header.Get("Mcp-Session-Id"))
			}
		}
	}
	if got := a.todo(td.ID); got.State != store.StatePending || got.Attempts != 0 {
		t.Fatalf("after the refused requests: %+v, want untouched", got)
	}
	if n := len(a.ag.sessions.all()); n != 0 {
		t.Fatalf("%d sessions open after refused requests, want none", n)
	}
	if rows, _ := a.st.ListAudit(t.Context(), store.AuditFilter{Actor: "agent:ana"}); len(rows) != 0 {
		t.Fatalf("audit rows of ana after refused requests: %+v", rows)
	}

	// A bearer decides whatever assertion comes with it (Access adds one to every request).
	resp, text := a.raw(http.MethodPost, cred, "", initializeBody, map[string]string{cfaccess.Header: "garbage"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("bearer beside a bad assertion: %d %s", resp.StatusCode, text)
	}

	// Access not configured: the assertion is not a credential at all.
	plain := newEnv(t)
	if resp, _ := plain.raw(http.MethodPost, "", "", initializeBody, map[string]string{cfaccess.Header: a.assertion(a.key, ana)}); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("assertion to a server without Access: %d, want 401", resp.StatusCode)
	}
}

// BenchmarkAccessAuth compares a stateless list_todos authenticated by a bearer
// with the same authenticated by an Access assertion, over HTTP, the two
// interleaved request by request; it reports each one's time and the ratio.
//
//	go test -run '^$' -bench AccessAuth -count 5 ./agent/
func BenchmarkAccessAuth(b *testing.B) {
	team, key := cfaccesstest.NewTeam(b)
	vclock := testkit.NewClock(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	e := newEnv(b, func(c *envConfig) { c.agent.CFAccess = team.Verifier(b, vclock.Now) })
	ana := "ana@example.com"
	_, cred := e.endpoint("ana", []string{"inbox"}, nil, func(s *store.EndpointSpec) { s.CFAccessIdentity = &ana })
	list := `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_todos","arguments":{},` +
		`"_meta":{"` + mcp.MetaKeyProtocolVersion + `":"2026-07-28","` + mcp.MetaKeyClientCapabilities + `":{}}}}`
	headers := func(more map[string]string) map[string]string {
		h := map[string]string{mcp.HeaderProtocolVersion: "2026-07-28", mcp.HeaderMethod: "tools/call", mcp.HeaderName: "list_todos"}
		maps.Copy(h, more)
		return h
	}
	ways := []struct {
		cred   string
		header map[string]string
		took   time.Duration
	}{{cred, headers(nil), 0}, {"", headers(map[string]string{cfaccess.Header: key.Sign(b, cfaccesstest.Claims(ana, vclock.Now()))}), 0}}
	for b.Loop() {
		for i := range ways {
			w := &ways[i]
			start := time.Now()
			if resp, body := e.raw(http.MethodPost, w.cred, "", list, w.header); resp.StatusCode != http.StatusOK {
				b.Fatalf("%d %s", resp.StatusCode, body)
			}
			w.took += time.Since(start)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(ways[0].took.Microseconds())/n, "bearer-µs/req")
	b.ReportMetric(float64(ways[1].took.Microseconds())/n, "access-µs/req")
	b.ReportMetric(float64(ways[1].took)/float64(ways[0].took), "access/bearer")
}

// The endpoint's own rate limit holds for its requests through Access: with a
// burst of one and a rate of one call in 1000 s, the second call is refused.
func TestCloudflareAccessKeepsTheEndpointsRateLimit(t *testing.T) {
	a := newAccessEnv(t)
	ana := "ana@example.com"
	rate, burst := 0.001, 1
	a.endpoint("ana", []string{"inbox"}, nil, func(s *store.EndpointSpec) {
		s.CFAccessIdentity, s.RatePerSecond, s.RateBurst = &ana, &rate, &burst
	})
	ac, err := a.accessClient(a.assertion(a.key, ana), mcp.ProtocolVersion20251125)
	if err != nil {
		t.Fatal(err)
	}
	ac.ok(t, VerbListTodos, nil, nil)
	if code := ac.code(t, VerbListTodos, nil); code != CodeRateLimited {
		t.Fatalf("second call at once: %q, want rate_limited", code)
	}
}
