package web

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/store"
)

var (
	credentialRE = regexp.MustCompile(`<pre class="code secret" id="credential">([^<]+)</pre>`)
	configRE     = regexp.MustCompile(`(?s)<pre class="code" id="mcp-config">(.+?)</pre>`)
	inlineRE     = regexp.MustCompile(`(?s)<pre class="code" id="mcp-config-inline">(.+?)</pre>`)
	exportRE     = regexp.MustCompile(`<pre class="code secret gap-below" id="credential-export">([^<]+)</pre>`)
	commandRE    = regexp.MustCompile(`<pre class="code wrap" id="claude-command">([^<]+)</pre>`)
)

func TestCreateEndpoint(t *testing.T) {
	f := newFixture(t, Options{BaseURL: "https://board.example/"})
	cookie, csrf := f.login()
	form := url.Values{csrfField: {csrf}, "agent_id": {"triage"}, "name": {"Issue triage"},
		"queues": {"github, inbox"}, "verbs": {"claim_next", "complete", "fail"}, "default_lease": {"600"},
		"max_webhooks": {"2"}, "webhook_sources": {"github"}, "webhook_queues": {""}, "capabilities": {"everything"}}
	res, body := f.post("/endpoints", cookie, form)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d:\n%s", res.StatusCode, body)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-store" {
		t.Fatalf("credential page Cache-Control %q, want no-store", cc)
	}
	m := credentialRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no credential on the page:\n%s", body)
	}
	cred := m[1]
	ep, err := f.st.EndpointByCredential(t.Context(), cred)
	if err != nil {
		t.Fatalf("the credential shown does not authenticate: %v", err)
	}
	if ep.AgentID != "triage" || ep.AgentName != "Issue triage" || strings.Join(ep.Queues, ",") != "github,inbox" ||
		strings.Join(ep.Verbs, ",") != "claim_next,complete,fail" || ep.DefaultLeaseTTL != 600 ||
		ep.Ceiling.MaxWebhooks != 2 || strings.Join(ep.Ceiling.Sources, ",") != "github" ||
		strings.Join(ep.Ceiling.Queues, ",") != "github,inbox" || strings.Join(ep.Capabilities, ",") != "everything" ||
		ep.OwnerOperatorID != f.human.ID {
		t.Fatalf("endpoint %+v", ep)
	}

	// The MCP client config offered first reads the credential from the
	// environment, so the file the page says to save in the project holds no
	// secret; the export line and the shell command name the same variable. A
	// config with the credential written in comes after, for who wants one.
	if m := exportRE.FindStringSubmatch(body); m == nil || m[1] != "export SWITCHBOARD_CREDENTIAL="+cred {
		t.Fatalf("export line %q", m)
	}
	if m := commandRE.FindStringSubmatch(body); m == nil ||
		html.UnescapeString(m[1]) != `claude mcp add --transport http switchboard https://board.example/mcp --header "Authorization: Bearer ${SWITCHBOARD_CREDENTIAL:?export SWITCHBOARD_CREDENTIAL first}"` {
		t.Fatalf("claude mcp add line %q", m)
	}
	for _, c := range []struct {
		re         *regexp.Regexp
		credential string
	}{{configRE, "${SWITCHBOARD_CREDENTIAL}"}, {inlineRE, cred}} {
		cm := c.re.FindStringSubmatch(body)
		if cm == nil {
			t.Fatalf("no %s on the page", c.re)
		}
		var cfg struct {
			MCPServers map[string]struct {
				Type    string            `json:"type"`
				URL     string            `json:"url"`
				Headers map[string]string `json:"headers"`
			} `json:"mcpServers"`
		}
		if err := json.Unmarshal([]byte(html.UnescapeString(cm[1])), &cfg); err != nil {
			t.Fatalf("config is not JSON: %v\n%s", err, cm[1])
		}
		srv := cfg.MCPServers["switchboard"]
		if srv.Type != "http" || srv.URL != "https://board.example/mcp" || srv.Headers["Authorization"] != "Bearer "+c.credential {
			t.Fatalf("config %+v, want the credential as %s", cfg, c.credential)
		}
	}
	if i, j := strings.Index(body, `id="mcp-config"`), strings.Index(body, `id="mcp-config-inline"`); i < 0 || j < i {
		t.Fatal("the config with the credential written in comes before the one that reads it from the environment")
	}

	rows := f.audited(fmt.Sprintf("endpoint:%d", ep.ID))
	if len(rows) != 1 || rows[0].Action != "endpoint.create" || rows[0].Actor != store.OperatorActor(f.human.ID) {
		t.Fatalf("audit %+v", rows)
	}

	// The credential is never shown again.
	for _, path := range []string{"/endpoints", fmt.Sprintf("/endpoints/%d", ep.ID), "/audit"} {
		if _, body := f.get(path, cookie); strings.Contains(body, cred) {
			t.Fatalf("%s shows the credential", path)
		}
	}
}

func TestCreateEndpointBaseURLFromRequest(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	_, body := f.post("/endpoints", cookie, url.Values{csrfField: {csrf}, "agent_id": {"bot"}, "queues": {"inbox"}})
	want := fmt.Sprintf("&#34;url&#34;: &#34;%s/mcp&#34;", f.srv.URL)
	if !strings.Contains(body, want) {
		t.Fatalf("config lacks %s", want)
	}
}

func TestCreateEndpointRejects(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	// The store's refusal of a word, as the board says it.
	said := map[string]string{"unknown verb": "&#34;drop_tables&#34; is not a verb.",
		"bad source": "&#34;myspace&#34; is not a webhook source type."}
	for name, form := range map[string]url.Values{
		"bad agent id":  {"agent_id": {"Bad Agent"}, "queues": {"inbox"}},
		"no queues":     {"agent_id": {"bot"}, "queues": {" , "}},
		"bad queue":     {"agent_id": {"bot"}, "queues": {"in box!"}},
		"unknown verb":  {"agent_id": {"bot"}, "queues": {"inbox"}, "verbs": {"drop_tables"}},
		"bad source":    {"agent_id": {"bot"}, "queues": {"inbox"}, "webhook_sources": {"myspace"}},
		"lease too big": {"agent_id": {"bot"}, "queues": {"inbox"}, "default_lease": {"86401"}},
		"lease not int": {"agent_id": {"bot"}, "queues": {"inbox"}, "default_lease": {"5m"}},
		"negative max":  {"agent_id": {"bot"}, "queues": {"inbox"}, "max_webhooks": {"-1"}},
		"negative rate": {"agent_id": {"bot"}, "queues": {"inbox"}, "rate": {"-1"}},
		"rate not num":  {"agent_id": {"bot"}, "queues": {"inbox"}, "rate": {"NaN"}},
		"burst too big": {"agent_id": {"bot"}, "queues": {"inbox"}, "burst": {"1000001"}},
	} {
		t.Run(name, func(t *testing.T) {
			form.Set(csrfField, csrf)
			res, body := f.post("/endpoints", cookie, form)
			if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `class="flash err"`) {
				t.Fatalf("status %d, want 400 with the form and a message", res.StatusCode)
			}
			if strings.Contains(body, `id="credential"`) {
				t.Fatal("a credential was shown")
			}
			if want, ok := said[name]; ok && !strings.Contains(body, want) {
				t.Errorf("the page does not say %s", want)
			}
		})
	}
	if eps, err := f.st.ListEndpoints(t.Context(), true); err != nil || len(eps) != 0 {
		t.Fatalf("endpoints created: %v %v", eps, err)
	}
}

func TestUpdateAndRevokeEndpoint(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	ep, cred, err := f.st.CreateEndpoint(t.Context(), "bot", endpointSpec([]string{"inbox"}), "test")
	if err != nil {
		t.Fatal(err)
	}
	res, body := f.get(fmt.Sprintf("/endpoints/%d", ep.ID), cookie)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `value="inbox"`) {
		t.Fatalf("edit form: %d", res.StatusCode)
	}
	res, _ = f.post(fmt.Sprintf("/endpoints/%d", ep.ID), cookie, url.Values{csrfField: {csrf}, "name": {"Bot"},
		"queues": {"inbox,github"}, "verbs": {"claim_next", "heartbeat", "complete"}, "default_lease": {"120"},
		"max_webhooks": {"1"}, "webhook_sources": {"stripe", "github"}, "capabilities": {""}, "rate": {"500.5"}, "burst": {"1000"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("update: status %d", res.StatusCode)
	}
	// The form shows the rate limit it set, and sends it back unchanged.
	if _, body := f.get(fmt.Sprintf("/endpoints/%d", ep.ID), cookie); !strings.Contains(body, `name="rate" inputmode="decimal" pattern="[0-9]*[.]?[0-9]*" value="500.5"`) ||
		!strings.Contains(body, `value="1000"`) {
		t.Fatal("the edit form does not show the endpoint's rate limit")
	}
	got, err := f.st.Endpoint(t.Context(), ep.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.AgentName != "Bot" || strings.Join(got.Queues, ",") != "inbox,github" || got.DefaultLeaseTTL != 120 ||
		strings.Join(got.Verbs, ",") != "claim_next,heartbeat,complete" || got.Ceiling.MaxWebhooks != 1 ||
		strings.Join(got.Ceiling.Sources, ",") != "stripe,github" || strings.Join(got.Ceiling.Queues, ",") != "inbox,github" ||
		got.RatePerSecond != 500.5 || got.RateBurst != 1000 {
		t.Fatalf("after update: %+v", got)
	}
	// An empty default lease, rate and burst clear them.
	f.post(fmt.Sprintf("/endpoints/%d", ep.ID), cookie, url.Values{csrfField: {csrf}, "queues": {"inbox"}, "default_lease": {""}})
	if got, _ := f.st.Endpoint(t.Context(), ep.ID); got.DefaultLeaseTTL != 0 || got.RatePerSecond != 0 || got.RateBurst != 0 {
		t.Fatalf("lease or rate limit not cleared: %+v", got)
	}
	if res, _ := f.post(fmt.Sprintf("/endpoints/%d", ep.ID), cookie, url.Values{csrfField: {csrf}, "queues": {""}}); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("update without queues: %d", res.StatusCode)
	}

	res, _ = f.post(fmt.Sprintf("/endpoints/%d/revoke", ep.ID), cookie, url.Values{csrfField: {csrf}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: status %d", res.StatusCode)
	}
	if _, err := f.st.EndpointByCredential(t.Context(), cred); err == nil {
		t.Fatal("the credential still works after revoke")
	}
	var actions []string
	for _, r := range f.audited(fmt.Sprintf("endpoint:%d", ep.ID)) {
		if r.Actor == store.OperatorActor(f.human.ID) {
			actions = append(actions, r.Action)
		}
	}
	if strings.Join(actions, ",") != "endpoint.revoke,endpoint.update,endpoint.update" {
		t.Fatalf("audited actions by the human: %v", actions)
	}
	if res, _ := f.post(fmt.Sprintf("/endpoints/%d/revoke", ep.ID), cookie, url.Values{csrfField: {csrf}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("second revoke: %d, want 404", res.StatusCode)
	}
	// Revoked endpoints are listed only when asked.
	if _, body := f.get("/endpoints", cookie); strings.Contains(body, fmt.Sprintf(`data-endpoint-id="%d"`, ep.ID)) {
		t.Fatal("revoked endpoint in the default list")
	}
	if _, body := f.get("/endpoints?all=1", cookie); !strings.Contains(body, fmt.Sprintf(`data-endpoint-id="%d"`, ep.ID)) {
		t.Fatal("revoked endpoint missing from ?all=1")
	}
}

// Revoking an agent's only endpoint from the board hands back the todos it held,
// and the confirmation says so.
func TestRevokeReleasesTheAgentsTodos(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	ep, _, err := f.st.CreateEndpoint(t.Context(), "bot", endpointSpec([]string{"inbox"}), "test")
	if err != nil {
		t.Fatal(err)
	}
	held := f.addTodo("inbox", "work")
	if _, err := f.st.Claim(t.Context(), store.Ack{ID: held.ID, Owner: "agent:bot"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	// The confirmation before says the todos go back.
	if _, body := f.get(fmt.Sprintf("/endpoints/%d", ep.ID), cookie); !strings.Contains(body,
		"Its credential stops working at once, and the todos its agent holds go back to their queues") {
		t.Fatal("the Revoke confirmation does not say the todos go back")
	}
	res, _ := f.post(fmt.Sprintf("/endpoints/%d/revoke", ep.ID), cookie, url.Values{csrfField: {csrf}})
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/endpoints" {
		t.Fatalf("revoke: %d to %q", res.StatusCode, loc)
	}
	if got := f.todo(held.ID); got.State != store.StatePending {
		t.Fatalf("the revoked agent's todo is %s, want pending", got.State)
	}
	if body := f.follow(res, cookie); !strings.Contains(body, "and the 1 todo its agent held went back to pending") {
		t.Fatal("the confirmation does not say the todos went back")
	}
}

type fakeAgents map[int64]agent.Activity

func (f fakeAgents) Activity(id int64) agent.Activity { return f[id] }

// The endpoints list says what each agent is doing: its sessions, those listening
// for the doorbell, its latest request and the todos it holds, so an operator sees
// an agent that stopped; the list's Revoke says the todos go back too.
func TestEndpointListShowsWhatAgentsAreDoing(t *testing.T) {
	twoAgents := func(f *fixture) (store.Endpoint, store.Endpoint) {
		t.Helper()
		busy, _, err := f.st.CreateEndpoint(t.Context(), "busy", endpointSpec([]string{"inbox"}), "test")
		if err != nil {
			t.Fatal(err)
		}
		quiet, _, err := f.st.CreateEndpoint(t.Context(), "quiet", endpointSpec([]string{"inbox"}), "test")
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			td := f.addTodo("inbox", "work")
			if _, err := f.st.Claim(t.Context(), store.Ack{ID: td.ID, Owner: "agent:busy"}, time.Hour); err != nil {
				t.Fatal(err)
			}
		}
		return busy, quiet
	}
	f := newFixture(t, Options{})
	busy, quiet := twoAgents(f)
	f.ui.opts.Agents = fakeAgents{busy.ID: {Sessions: 2, Listening: 1, LastRequest: f.clock.Now().Add(-3 * time.Minute)}}
	cookie, _ := f.login()
	_, body := f.get("/endpoints", cookie)
	row := func(ep store.Endpoint) string {
		t.Helper()
		start := strings.Index(body, fmt.Sprintf(`data-endpoint-id="%d"`, ep.ID))
		if start < 0 {
			t.Fatalf("no row for %s", ep.AgentID)
		}
		end := strings.Index(body[start:], "</tr>")
		return body[start : start+end]
	}
	for _, want := range []string{"2 live sessions · 1 listening · last request", "3m ago", "holds 2 todos"} {
		if !strings.Contains(row(busy), want) {
			t.Errorf("the busy agent's row lacks %q:\n%s", want, row(busy))
		}
	}
	for _, want := range []string{"no session", "no request since start-up"} {
		if !strings.Contains(row(quiet), want) {
			t.Errorf("the quiet agent's row lacks %q:\n%s", want, row(quiet))
		}
	}
	if !strings.Contains(row(busy), "the todos its agent holds go back to their queues") {
		t.Error("the list's Revoke does not say the todos go back")
	}
}

// Revoking one of two live endpoints of an agent (a rotation) keeps its todos
// claimed, and the confirmation says so rather than that it held none.
func TestRevokeSaysWhenTheTodosAreKept(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	old, _, err := f.st.CreateEndpoint(t.Context(), "bot", endpointSpec([]string{"inbox"}), "test")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.st.CreateEndpoint(t.Context(), "bot", endpointSpec([]string{"inbox"}), "test"); err != nil {
		t.Fatal(err)
	}
	held := f.addTodo("inbox", "work")
	if _, err := f.st.Claim(t.Context(), store.Ack{ID: held.ID, Owner: "agent:bot"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	res, _ := f.post(fmt.Sprintf("/endpoints/%d/revoke", old.ID), cookie, url.Values{csrfField: {csrf}})
	if body := f.follow(res, cookie); !strings.Contains(body, "the todos its agent holds stay claimed, because another live endpoint speaks for that agent") {
		t.Fatal("the confirmation does not say the todos were kept")
	}
	if got := f.todo(held.ID); got.State != store.StateClaimed {
		t.Fatalf("the todo is %s, want still claimed", got.State)
	}
	// An agent that holds nothing is not said to keep todos.
	idle, _, err := f.st.CreateEndpoint(t.Context(), "idle", endpointSpec([]string{"inbox"}), "test")
	if err == nil {
		_, _, err = f.st.CreateEndpoint(t.Context(), "idle", endpointSpec([]string{"inbox"}), "test")
	}
	if err != nil {
		t.Fatal(err)
	}
	res, _ = f.post(fmt.Sprintf("/endpoints/%d/revoke", idle.ID), cookie, url.Values{csrfField: {csrf}})
	if body := f.follow(res, cookie); strings.Contains(body, "stay claimed") || !strings.Contains(body, "its agent held no todos") {
		t.Fatal("the confirmation for an agent that holds nothing speaks of todos kept")
	}
}

// The New endpoint form sent twice (a reload of the page that shows the
// credential) makes one endpoint and shows its credential again, rather than
// make a second whose credential nobody kept; a refused form can be sent again.
func TestCreateEndpointOnce(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	_, page := f.get("/endpoints/new", cookie)
	m := regexp.MustCompile(`name="once" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the New endpoint form has no one-time token:\n%s", page)
	}
	bad := url.Values{csrfField: {csrf}, "once": {m[1]}, "agent_id": {"bot"}, "queues": {""}}
	if res, _ := f.post("/endpoints", cookie, bad); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a form with no queues: %d", res.StatusCode)
	}
	form := url.Values{csrfField: {csrf}, "once": {m[1]}, "agent_id": {"bot"}, "queues": {"inbox"}}
	var creds []string
	for range 2 {
		res, body := f.post("/endpoints", cookie, form)
		c := credentialRE.FindStringSubmatch(body)
		if res.StatusCode != http.StatusOK || c == nil {
			t.Fatalf("create: %d\n%s", res.StatusCode, body)
		}
		creds = append(creds, c[1])
	}
	eps, err := f.st.ListEndpoints(t.Context(), true)
	if err != nil || len(eps) != 1 || creds[0] != creds[1] {
		t.Fatalf("sent twice: %d endpoints, credentials %q, %v", len(eps), creds, err)
	}
}

// The endpoint form names the modules this server runs, and a grant of one it
// does not run (a misspelling) is made but said, on creation and on update.
func TestEndpointFormSaysWhichModulesExist(t *testing.T) {
	f := newFixture(t, Options{Modules: &fakeModules{status: sampleModules()}})
	cookie, csrf := f.login()
	var names []string
	for _, m := range sampleModules() {
		names = append(names, m.Name)
	}
	if _, page := f.get("/endpoints/new", cookie); !strings.Contains(page, "this server runs "+strings.Join(names, ", ")) {
		t.Fatalf("the form does not name the modules (%v):\n%s", names, page)
	}
	res, body := f.post("/endpoints", cookie, url.Values{csrfField: {csrf}, "agent_id": {"bot"}, "queues": {"inbox"},
		"capabilities": {names[0] + ", evrything"}})
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `No module this server runs provides <span class="mono">evrything</span>`) ||
		strings.Contains(body, `provides <span class="mono">`+names[0]) {
		t.Fatalf("create with a misspelt capability: %d\n%s", res.StatusCode, body)
	}
	eps, _ := f.st.ListEndpoints(t.Context(), false)
	upd := url.Values{csrfField: {csrf}, "name": {"bot"}, "queues": {"inbox"}, "capabilities": {"evrything"}}
	res = f.do(http.MethodPost, fmt.Sprintf("/endpoints/%d", eps[0].ID), cookie, upd, nil)
	if page := f.follow(res, cookie); !strings.Contains(page, "A capability it grants names no module this server runs") {
		t.Fatalf("update with a misspelt capability:\n%s", page)
	}
	upd.Set("capabilities", names[0])
	res = f.do(http.MethodPost, fmt.Sprintf("/endpoints/%d", eps[0].ID), cookie, upd, nil)
	if page := f.follow(res, cookie); strings.Contains(page, "names no module") || !strings.Contains(page, "Endpoint updated.") {
		t.Fatalf("update with a known capability:\n%s", page)
	}
}

// The form shows and edits which of the granted modules' tools the agent sees; a
// form without those fields (a page from before they were on it) keeps them.
func TestEndpointFormEditsToolLists(t *testing.T) {
	f := newFixture(t, Options{Modules: &fakeModules{status: sampleModules()}})
	cookie, csrf := f.login()
	if _, page := f.get("/endpoints/new", cookie); !strings.Contains(page, "this server's: everything_add, everything_echo") {
		t.Fatalf("the form does not name the tools:\n%s", page)
	}
	res, _ := f.post("/endpoints", cookie, url.Values{csrfField: {csrf}, "agent_id": {"bot"}, "queues": {"inbox"},
		"capabilities": {"everything"}, "tool_allow": {"everything_add, everything_echo"}, "tool_deny": {"everything_echo"}})
	if res.StatusCode != http.StatusOK {
		t.Fatalf("create: %d", res.StatusCode)
	}
	eps, _ := f.st.ListEndpoints(t.Context(), false)
	ep := eps[0]
	if !slices.Equal(ep.ToolAllow, []string{"everything_add", "everything_echo"}) || !slices.Equal(ep.ToolDeny, []string{"everything_echo"}) {
		t.Fatalf("saved lists: allow %q deny %q", ep.ToolAllow, ep.ToolDeny)
	}
	path := fmt.Sprintf("/endpoints/%d", ep.ID)
	if _, page := f.get(path, cookie); !strings.Contains(page, `name="tool_allow" value="everything_add, everything_echo"`) ||
		!strings.Contains(page, `name="tool_deny" value="everything_echo"`) {
		t.Fatalf("the edit form does not show the lists:\n%s", page)
	}
	res, body := f.post(path, cookie, url.Values{csrfField: {csrf}, "queues": {"inbox"}, "capabilities": {"everything"},
		"tool_allow": {"everything_echo!"}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "is not a tool name") {
		t.Fatalf("a tool name with a !: %d", res.StatusCode)
	}
	// A refused form shows the lists again, so that its next submission keeps
	// them: as sent, and as stored when the form had no such fields.
	res, body = f.post(path, cookie, url.Values{csrfField: {csrf}, "queues": {"inbox"}, "capabilities": {"everything"},
		"default_lease": {"abc"}, "tool_allow": {"everything_add, everything_echo"}, "tool_deny": {"everything_echo"}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `name="tool_deny" value="everything_echo"`) {
		t.Fatalf("a refused form lost the deny list: %d", res.StatusCode)
	}
	res, body = f.post(path, cookie, url.Values{csrfField: {csrf}, "queues": {"inbox"}, "capabilities": {"everything"},
		"default_lease": {"abc"}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `name="tool_deny" value="everything_echo"`) ||
		!strings.Contains(body, `name="tool_allow" value="everything_add, everything_echo"`) {
		t.Fatalf("a refused form without the fields did not show the stored lists: %d", res.StatusCode)
	}
	// A form without the fields keeps the lists; one with them empty clears them.
	f.post(path, cookie, url.Values{csrfField: {csrf}, "queues": {"inbox"}, "capabilities": {"everything"}})
	if got, _ := f.st.Endpoint(t.Context(), ep.ID); len(got.ToolAllow) != 2 || len(got.ToolDeny) != 1 {
		t.Fatalf("a form without the fields changed the lists: %q %q", got.ToolAllow, got.ToolDeny)
	}
	f.post(path, cookie, url.Values{csrfField: {csrf}, "queues": {"inbox"}, "capabilities": {"everything"}, "tool_allow": {""}, "tool_deny": {""}})
	if got, _ := f.st.Endpoint(t.Context(), ep.ID); len(got.ToolAllow) != 0 || len(got.ToolDeny) != 0 {
		t.Fatalf("empty fields did not clear the lists: %q %q", got.ToolAllow, got.ToolDeny)
	}
}

// The board creates an agent of capability modules alone: no queues, and no
// verbs whatever boxes are ticked (all are, on a new form); the form does not
// make the queues required.
func TestCreateEndpointForModulesAlone(t *testing.T) {
	f := newFixture(t, Options{Modules: &fakeModules{status: sampleModules()}})
	cookie, csrf := f.login()
	if _, page := f.get("/endpoints/new", cookie); strings.Contains(page, `name="queues" required`) {
		t.Fatal("the form requires queues")
	}
	form := url.Values{csrfField: {csrf}, "agent_id": {"tools"}, "queues": {""}, "capabilities": {""},
		"verbs": {"claim_next", "list_todos"}}
	if res, body := f.post("/endpoints", cookie, form); res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Give at least one queue") {
		t.Fatalf("neither queues nor modules: %d", res.StatusCode)
	}
	form.Set("capabilities", "everything")
	if res, _ := f.post("/endpoints", cookie, form); res.StatusCode != http.StatusOK {
		t.Fatalf("modules alone: %d", res.StatusCode)
	}
	eps, _ := f.st.ListEndpoints(t.Context(), false)
	if len(eps) != 1 || len(eps[0].Queues) != 0 || len(eps[0].Verbs) != 0 {
		t.Fatalf("endpoint for modules alone: %+v", eps)
	}
}

// Tool lists naming no tool a module offers (a typo, or the module's own name for
// a tool, which a deny list then does not deny) are saved, and said.
func TestEndpointFormSaysWhichToolsExist(t *testing.T) {
	f := newFixture(t, Options{Modules: &fakeModules{status: sampleModules()}})
	cookie, csrf := f.login()
	res, body := f.post("/endpoints", cookie, url.Values{csrfField: {csrf}, "agent_id": {"bot"}, "queues": {"inbox"},
		"capabilities": {"everything"}, "tool_deny": {"echo, everything_add"}})
	if res.StatusCode != http.StatusOK || !strings.Contains(body, `No module this server runs offers <span class="mono">echo</span>:`) ||
		strings.Contains(body, `<span class="mono">everything_add</span>:`) {
		t.Fatalf("create with a deny list naming a module's own name: %d\n%s", res.StatusCode, body)
	}
	eps, _ := f.st.ListEndpoints(t.Context(), false)
	upd := url.Values{csrfField: {csrf}, "queues": {"inbox"}, "capabilities": {"everything"}, "tool_allow": {"everything_ecoh"}, "tool_deny": {""}}
	res = f.do(http.MethodPost, fmt.Sprintf("/endpoints/%d", eps[0].ID), cookie, upd, nil)
	if page := f.follow(res, cookie); !strings.Contains(page, "Its tool lists name a tool no module this server runs offers") {
		t.Fatalf("update with a misspelt tool:\n%s", page)
	}
}

// Emptying an agent's queues on the edit form, its verbs still ticked, is refused
// (as the CLI refuses it) rather than turn a queue worker into a modules-only agent
// by a slip; a refused new form keeps the verbs ticked as sent.
func TestEndpointFormQueuesEmptied(t *testing.T) {
	f := newFixture(t, Options{Modules: &fakeModules{status: sampleModules()}})
	cookie, csrf := f.login()
	f.post("/endpoints", cookie, url.Values{csrfField: {csrf}, "agent_id": {"bot"}, "queues": {"inbox"},
		"capabilities": {"everything"}, "verbs": {"claim_next", "complete"}})
	eps, _ := f.st.ListEndpoints(t.Context(), false)
	res, body := f.post(fmt.Sprintf("/endpoints/%d", eps[0].ID), cookie, url.Values{csrfField: {csrf}, "queues": {""},
		"capabilities": {"everything"}, "verbs": {"claim_next", "complete"}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "untick its verbs too") {
		t.Fatalf("emptying a queue worker's queues: %d", res.StatusCode)
	}
	if ep, _ := f.st.Endpoint(t.Context(), eps[0].ID); len(ep.Queues) != 1 || len(ep.Verbs) != 2 {
		t.Fatalf("a refused edit changed the endpoint: %+v", ep)
	}
	_, body = f.post("/endpoints", cookie, url.Values{csrfField: {csrf}, "agent_id": {"tools"}, "queues": {""},
		"capabilities": {"everything"}, "verbs": {"claim_next", "complete"}, "default_lease": {"abc"}})
	if n := strings.Count(body, `name="verbs" value="claim_next" checked`) + strings.Count(body, `name="verbs" value="complete" checked`); n != 2 {
		t.Fatalf("a refused new form came back with %d of its 2 verbs ticked", n)
	}
}

// A request with one tool field and not the other changes that list alone.
func TestEndpointFormOneToolField(t *testing.T) {
	f := newFixture(t, Options{Modules: &fakeModules{status: sampleModules()}})
	cookie, csrf := f.login()
	f.post("/endpoints", cookie, url.Values{csrfField: {csrf}, "agent_id": {"bot"}, "queues": {"inbox"},
		"capabilities": {"everything"}, "tool_allow": {""}, "tool_deny": {"everything_echo"}})
	eps, _ := f.st.ListEndpoints(t.Context(), false)
	f.post(fmt.Sprintf("/endpoints/%d", eps[0].ID), cookie, url.Values{csrfField: {csrf}, "queues": {"inbox"},
		"capabilities": {"everything"}, "tool_allow": {"everything_add"}})
	if ep, _ := f.st.Endpoint(t.Context(), eps[0].ID); len(ep.ToolDeny) != 1 || len(ep.ToolAllow) != 1 {
		t.Fatalf("a form with the allow list alone changed the deny list: allow %q deny %q", ep.ToolAllow, ep.ToolDeny)
	}
}

// The endpoints page says whether each agent may create webhooks, under what
// ceiling and for which source types, and links one that may not to the setting.
func TestEndpointsPageShowsTheWebhookCeiling(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	q := []string{"inbox"}
	quick, _, err := f.st.CreateEndpoint(t.Context(), "quick", store.EndpointSpec{Queues: &q}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	max, sources, verbs := 2, []string{"github", "stripe"}, store.AllVerbs()
	if _, _, err := f.st.CreateEndpoint(t.Context(), "hooks", store.EndpointSpec{Queues: &q, Verbs: &verbs,
		MaxWebhooks: &max, WebhookSources: &sources}, "human:1"); err != nil {
		t.Fatal(err)
	}
	_, body := f.get("/endpoints", cookie)
	if !strings.Contains(body, "up to 2: github,stripe") ||
		!strings.Contains(body, fmt.Sprintf(`none (create_webhook not granted)</span> <a class="small" href="/endpoints/%d#webhook-ceiling">grant</a>`, quick.ID)) {
		t.Fatalf("the endpoints page does not show the webhook ceilings:\n%s", body)
	}
}
