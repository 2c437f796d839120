package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/store"
)

// Every verb × a queue in or out of scope × the verb granted, withheld, or
// withdrawn after the session started: every authorised call succeeds, and no
// unauthorised one does or changes anything.
func TestScopeMatrix(t *testing.T) {
	e := newEnv(t)
	const mine, theirs = "mine", "theirs"
	type grant int
	const (
		granted grant = iota
		withheld
		withdrawn
	)
	grantName := map[grant]string{granted: "granted", withheld: "withheld", withdrawn: "withdrawn"}
	queueless := map[string]bool{VerbGetDefaultLease: true, VerbSetDefaultLease: true}

	var authorisedOK, refused, unauthorisedOK int
	for _, verb := range store.TodoVerbs() {
		for _, g := range []grant{granted, withheld, withdrawn} {
			agentID := fmt.Sprintf("m-%s-%d", verb, g)
			verbs := store.AllVerbs()
			if g == withheld {
				verbs = slices.DeleteFunc(verbs, func(v string) bool { return v == verb })
			}
			ep, cred := e.endpoint(agentID, []string{mine}, verbs)
			c := e.dial(cred, false)
			if g == withdrawn {
				rest := slices.DeleteFunc(store.AllVerbs(), func(v string) bool { return v == verb })
				if _, err := e.st.UpdateEndpoint(t.Context(), ep.ID, store.EndpointSpec{Verbs: &rest}, "human:test"); err != nil {
					t.Fatal(err)
				}
			}
			queues := []string{mine, theirs}
			if queueless[verb] {
				queues = []string{mine}
			}
			for _, q := range queues {
				args, check := e.scopeCase(t, verb, q, "agent:"+agentID, ep.ID)
				res, err := c.call(verb, args)
				succeeded := err == nil && !res.IsError
				authorised := g == granted && q == mine
				label := fmt.Sprintf("%s on %s (%s)", verb, q, grantName[g])
				switch {
				case authorised && succeeded:
					authorisedOK++
				case authorised:
					t.Errorf("%s refused: %v %v", label, err, res)
				case succeeded:
					unauthorisedOK++
					t.Errorf("%s SUCCEEDED without authority: %s", label, text(res))
				default:
					refused++
					if err == nil {
						if code := c.code(t, verb, args); code != CodeForbidden && code != CodeNotFound {
							t.Errorf("%s refused with %s, want forbidden", label, code)
						}
					}
					check(t, label)
				}
			}
		}
	}
	if unauthorisedOK != 0 {
		t.Fatalf("%d unauthorised calls succeeded", unauthorisedOK)
	}
	if authorisedOK != len(store.TodoVerbs()) || refused == 0 {
		t.Fatalf("%d authorised successes (want %d), %d refusals", authorisedOK, len(store.TodoVerbs()), refused)
	}
}

// scopeCase prepares the world for verb on queue q and returns its arguments and a
// check that a refused call left everything as it was.
func (e *env) scopeCase(t *testing.T, verb, q, owner string, endpointID int64) (map[string]any, func(*testing.T, string)) {
	unchanged := func(id int64) func(*testing.T, string) {
		before := e.todo(id)
		return func(t *testing.T, label string) {
			after := e.todo(id)
			if after.State != before.State || after.Owner != before.Owner || after.UpdatedAt != before.UpdatedAt ||
				!equalTime(after.LeaseExpiry, before.LeaseExpiry) {
				t.Errorf("%s was refused but changed todo %d: %+v → %+v", label, id, before, after)
			}
		}
	}
	nothing := func(*testing.T, string) {}
	switch verb {
	case VerbListTodos:
		e.addTodo(q, "p")
		return map[string]any{"queue": q}, nothing
	case VerbClaim:
		td := e.addTodo(q, "p")
		return map[string]any{"todo_id": td.ID}, unchanged(td.ID)
	case VerbClaimNext:
		td := e.addTodo(q, "p")
		return map[string]any{"queue": q}, unchanged(td.ID)
	case VerbHeartbeat, VerbComplete, VerbFail, VerbRelease, VerbRequestApproval:
		// The agent holds the todo (say its scope was narrowed after it claimed).
		td := e.addTodo(q, "p")
		held, err := e.st.Claim(t.Context(), store.Ack{ID: td.ID, Owner: owner}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		args := map[string]any{"todo_id": td.ID, "lease_seq": held.LeaseSeq}
		if verb == VerbFail {
			args["error"] = "e"
		}
		if verb == VerbRequestApproval {
			args["question"] = "go?"
		}
		return args, unchanged(td.ID)
	case VerbGetDefaultLease:
		return map[string]any{}, nothing
	case VerbSetDefaultLease:
		return map[string]any{"default_lease_ttl_seconds": 600}, func(t *testing.T, label string) {
			if def, err := e.st.DefaultLease(t.Context(), endpointID); err != nil || def != 0 {
				t.Errorf("%s was refused but the default lease is %d (%v)", label, def, err)
			}
		}
	}
	t.Fatalf("no scope case for %s", verb)
	return nil, nil
}

func equalTime(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

// A queue outside the scope is refused before anything is read, and an endpoint
// with no queues sees nothing (an empty list must never mean "every queue").
func TestNoQueuesSeesNothing(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("empty", []string{}, nil)
	c := e.dial(cred, false)
	e.addTodo("inbox", "p")
	var list struct {
		Todos []store.Todo `json:"todos"`
	}
	c.ok(t, VerbListTodos, nil, &list)
	if len(list.Todos) != 0 {
		t.Fatalf("an endpoint without queues listed %d todos", len(list.Todos))
	}
	var next struct {
		Claimed bool `json:"claimed"`
	}
	c.ok(t, VerbClaimNext, nil, &next)
	if next.Claimed {
		t.Fatal("an endpoint without queues claimed a todo")
	}
}

// A human's scope edit reaches live sessions: a withdrawn verb disappears from the
// next request on, and Revalidate rebuilds the tool list (tools/list_changed) so a
// newly granted verb appears.
func TestScopeEditReachesLiveSessions(t *testing.T) {
	e := newEnv(t)
	ep, cred := e.endpoint("edited", []string{"inbox"}, []string{VerbListTodos, VerbClaimNext})
	c := e.dial(cred, true)
	names := func() []string {
		res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, tool := range res.Tools {
			out = append(out, tool.Name)
		}
		slices.Sort(out)
		return out
	}
	verbs := []string{VerbListTodos, VerbComplete}
	if _, err := e.st.UpdateEndpoint(t.Context(), ep.ID, store.EndpointSpec{Verbs: &verbs}, "human:cli"); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, []string{VerbListTodos}) {
		t.Fatalf("before revalidation tools = %v, want the withdrawn claim_next hidden", got)
	}
	if _, err := c.call(VerbClaimNext, nil); err == nil {
		t.Fatal("a withdrawn verb was still callable")
	}
	e.ag.Revalidate(t.Context())
	waitNote(t, c, string(mcp.MethodNotificationToolsListChanged))
	if got := names(); !slices.Equal(got, []string{VerbComplete, VerbListTodos}) {
		t.Fatalf("after revalidation tools = %v", got)
	}
}

// claim_next takes a list of queues too; every one of them must be in scope.
func TestClaimNextQueuesList(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("lists", []string{"a", "b", "c"}, nil)
	c := e.dial(cred, false)
	e.addTodo("a", "p")
	inB := e.addTodo("b", "p")
	if code := c.code(t, VerbClaimNext, map[string]any{"queues": []string{"b", "elsewhere"}}); code != CodeForbidden {
		t.Fatalf("a list with an out-of-scope queue: %s", code)
	}
	var claim claimResult
	c.ok(t, VerbClaimNext, map[string]any{"queues": []string{"b", "c"}}, &claim)
	if !claim.Claimed || claim.Todo.ID != inB.ID {
		t.Fatalf("claimed %+v, want todo %d from b", claim.Todo, inB.ID)
	}
}

// A todo in a queue outside the endpoint's scope answers exactly as an id that does
// not exist: ids cannot be probed for other tenants' todos and queue names.
func TestOutOfScopeTodoLooksMissing(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("bob", []string{"other"}, nil)
	c := e.dial(cred, false)
	theirs := e.addTodo("payroll", "p")
	// One claimed by the tenant it belongs to: its lease_seq is 1, the one bob
	// sends, so only the queue scope stands between bob and the lease.
	_, aliceCred := e.endpoint("alice", []string{"payroll"}, nil)
	held := e.addTodo("payroll", "h")
	e.dial(aliceCred, false).ok(t, VerbClaim, map[string]any{"todo_id": held.ID}, nil)
	missing := held.ID + 1000
	for _, verb := range []string{VerbClaim, VerbHeartbeat, VerbComplete, VerbFail, VerbRelease} {
		answer := func(id int64) (string, string) {
			args := map[string]any{"todo_id": id}
			switch verb {
			case VerbHeartbeat, VerbComplete, VerbRelease:
				args["lease_seq"] = 1
			case VerbFail:
				args["lease_seq"], args["error"] = 1, "x"
			}
			res, err := c.call(verb, args)
			if err != nil || !res.IsError {
				t.Fatalf("%s todo %d: %v %v", verb, id, err, res)
			}
			var p errorPayload
			if err := json.Unmarshal(res.RawStructuredContent, &p); err != nil {
				t.Fatal(err)
			}
			return p.Code, strings.ReplaceAll(p.Message, strconv.FormatInt(id, 10), "N")
		}
		wantCode, wantMsg := answer(missing)
		for _, id := range []int64{theirs.ID, held.ID} {
			code, msg := answer(id)
			if code != CodeNotFound || code != wantCode || msg != wantMsg || strings.Contains(msg, "payroll") {
				t.Errorf("%s on out-of-scope todo %d: %s %q; on a missing one: %s %q", verb, id, code, msg, wantCode, wantMsg)
			}
		}
	}
	if got := e.todo(theirs.ID); got.State != "pending" {
		t.Fatalf("the out-of-scope todo is %s", got.State)
	}
	if got := e.todo(held.ID); got.State != "claimed" || got.Owner != "agent:alice" {
		t.Fatalf("the out-of-scope claimed todo is %s by %s", got.State, got.Owner)
	}
}

// Wrong argument types are explained in the agent's terms: the argument and the
// JSON type it needs, never Go's names for the server's structs.
func TestArgumentErrorsSpeakJSON(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("types", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	for _, tc := range []struct {
		verb string
		args map[string]any
		want string
	}{
		{VerbClaim, map[string]any{"todo_id": "seven"}, "todo_id must be an integer, not string"},
		{VerbClaimNext, map[string]any{"queues": "inbox"}, "queues must be an array, not string"},
		{VerbClaimNext, map[string]any{"queue": []string{"inbox"}}, "queue must be a string, not array"},
		{VerbClaimNext, map[string]any{"lease_ttl_seconds": true}, "lease_ttl_seconds must be a number, not bool"},
		{VerbClaimNext, map[string]any{"colour": "red"}, `unknown field "colour"`},
	} {
		res, err := c.call(tc.verb, tc.args)
		if err != nil || !res.IsError {
			t.Fatalf("%s %v: %v %v", tc.verb, tc.args, err, res)
		}
		var p errorPayload
		if err := json.Unmarshal(res.RawStructuredContent, &p); err != nil {
			t.Fatal(err)
		}
		if p.Code != CodeInvalidArgument || !strings.Contains(p.Message, tc.want) || strings.Contains(p.Message, "Go value") ||
			strings.Contains(p.Message, "struct") {
			t.Errorf("%s %v: %s %q, want invalid_argument saying %q", tc.verb, tc.args, p.Code, p.Message, tc.want)
		}
	}
}

// The human raising an endpoint's webhook ceiling reaches live sessions too:
// under a ceiling of no webhooks create_webhook is not offered (it could only
// answer ceiling_exceeded); raised, it appears, quoting the ceiling and offering
// its sources and queues.
func TestCeilingEditReachesLiveSessions(t *testing.T) {
	e := newEnv(t)
	ep, cred := e.endpoint("hooker", []string{"inbox"}, nil)
	c := e.dial(cred, true)
	definition := func() (mcp.Tool, bool) { return definitionOf(t, c, VerbCreateWebhook) }
	if d, listed := definition(); listed {
		t.Fatalf("create_webhook offered under a ceiling of 0: %q", d.Description)
	}
	if _, err := c.call(VerbCreateWebhook, map[string]any{"source_type": "github", "queue": "inbox"}); err == nil {
		t.Fatal("create_webhook answered under a ceiling of 0")
	}
	if _, listed := definitionOf(t, c, VerbListWebhooks); !listed {
		t.Fatal("list_webhooks is hidden with create_webhook")
	}
	maxHooks, sources, queues := 3, []string{"github"}, []string{"inbox"}
	if _, err := e.st.UpdateEndpoint(t.Context(), ep.ID, store.EndpointSpec{MaxWebhooks: &maxHooks,
		WebhookSources: &sources, WebhookQueues: &queues}, "human:cli"); err != nil {
		t.Fatal(err)
	}
	e.ag.Revalidate(t.Context())
	waitNote(t, c, string(mcp.MethodNotificationToolsListChanged))
	d, listed := definition()
	if !listed || !strings.Contains(d.Description, "at most 3 webhooks, source types github, queues inbox") {
		t.Fatalf("create_webhook after the edit (listed %v): %q", listed, d.Description)
	}
	if src, _ := d.InputSchema.Properties["source_type"].(map[string]any); fmt.Sprint(src["enum"]) != "[github]" {
		t.Fatalf("create_webhook's source_type after the edit: %v", src)
	}
}

// definitionOf is the definition c's session lists for a tool.
func definitionOf(t *testing.T, c *agentClient, name string) (mcp.Tool, bool) {
	t.Helper()
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tool := range res.Tools {
		if tool.Name == name {
			return tool, true
		}
	}
	return mcp.Tool{}, false
}
