package agent

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/store"
)

// The whole drain loop over real HTTP: claim_next returns the payload, heartbeat
// extends the lease, complete finishes it, and nothing else returns the payload.
func TestDrainLoop(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("worker", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	payload := `{"pr": 7, "body": "` + strings.Repeat("x", 500) + `"}`
	added := e.addTodo("inbox", payload)

	var claimed struct {
		Claimed  bool `json:"claimed"`
		LeaseSeq int64
		Todo     map[string]any `json:"todo"`
	}
	c.ok(t, VerbClaimNext, nil, &claimed)
	if !claimed.Claimed || claimed.Todo["payload"] != payload || int64(claimed.Todo["id"].(float64)) != added.ID {
		t.Fatalf("claim_next = %+v", claimed)
	}
	got := e.todo(added.ID)
	if got.State != store.StateClaimed || got.Owner != "agent:worker" {
		t.Fatalf("after claim: %s owned by %q", got.State, got.Owner)
	}
	if want := e.clock.Now().Add(DefaultLeaseSeconds * time.Second); !got.LeaseExpiry.Equal(want) {
		t.Fatalf("lease expires %v, want %v (built-in default)", got.LeaseExpiry, want)
	}

	e.clock.Add(time.Minute)
	var hb map[string]any
	c.ok(t, VerbHeartbeat, map[string]any{"todo_id": added.ID, "lease_seq": got.LeaseSeq, "lease_ttl_seconds": 900}, &hb)
	if want := e.clock.Now().Add(900 * time.Second); !e.todo(added.ID).LeaseExpiry.Equal(want) {
		t.Fatalf("heartbeat did not extend the lease to %v", want)
	}

	var done struct {
		Todo map[string]any `json:"todo"`
	}
	c.ok(t, VerbComplete, map[string]any{"todo_id": added.ID, "lease_seq": got.LeaseSeq, "result": "merged"}, &done)
	if done.Todo["state"] != store.StateDone {
		t.Fatalf("complete answered %v", done.Todo)
	}
	for name, row := range map[string]map[string]any{"heartbeat": hb["todo"].(map[string]any), "complete": done.Todo} {
		if _, has := row["payload"]; has {
			t.Errorf("%s returned the payload", name)
		}
		if row["payload_size"] != float64(len(payload)) {
			t.Errorf("%s payload_size = %v, want %d", name, row["payload_size"], len(payload))
		}
	}
	var list struct {
		Todos []map[string]any `json:"todos"`
	}
	c.ok(t, VerbListTodos, nil, &list)
	if len(list.Todos) != 1 || list.Todos[0]["payload"] != nil || list.Todos[0]["payload_size"] != float64(len(payload)) {
		t.Fatalf("list_todos = %v", list.Todos)
	}
	if got := e.todo(added.ID); got.State != store.StateDone || got.Result != "merged" {
		t.Fatalf("stored todo: %s result %q", got.State, got.Result)
	}

	// The store audited every transition with the agent as actor.
	audit, err := e.st.ListAudit(t.Context(), store.AuditFilter{Actor: "agent:worker", Action: "todo."})
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range audit {
		actions = append(actions, a.Action)
	}
	for _, want := range []string{"todo.claim_next", "todo.heartbeat", "todo.complete"} {
		if !slices.Contains(actions, want) {
			t.Errorf("audit lacks %s: %v", want, actions)
		}
	}

	// Nothing left: a normal result, not an error.
	var none struct {
		Claimed bool   `json:"claimed"`
		Message string `json:"message"`
	}
	c.ok(t, VerbClaimNext, nil, &none)
	if none.Claimed || none.Message == "" {
		t.Fatalf("empty claim_next = %+v", none)
	}
}

func TestToolListingAndAnnotations(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("lister", []string{"inbox"}, []string{VerbListTodos, VerbClaimNext, VerbComplete})
	c := e.dial(cred, false)
	res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		a := tool.Annotations
		if a.ReadOnlyHint == nil || a.DestructiveHint == nil || a.IdempotentHint == nil || a.OpenWorldHint == nil {
			t.Errorf("%s leaves a hint unset: %+v", tool.Name, a)
			continue
		}
		if *a.OpenWorldHint {
			t.Errorf("%s claims to reach an open world", tool.Name)
		}
		if tool.InputSchema.AdditionalProperties != false {
			t.Errorf("%s schema allows unknown arguments", tool.Name)
		}
	}
	slices.Sort(names)
	if want := []string{VerbClaimNext, VerbComplete, VerbListTodos}; !slices.Equal(names, want) {
		t.Fatalf("listed %v, want only the granted %v", names, want)
	}
	for _, tool := range res.Tools {
		if tool.Name == VerbListTodos && !*tool.Annotations.ReadOnlyHint {
			t.Error("list_todos is not marked read-only")
		}
	}
	// A tool that is not listed cannot be called either.
	if _, err := c.call(VerbClaim, map[string]any{"todo_id": 1}); err == nil {
		t.Error("an ungranted verb was callable")
	}
}

func TestListTodosPagesWithCursor(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("pager", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	var want []int64
	for range 5 {
		want = append(want, e.addTodo("inbox", "p").ID)
	}
	e.addTodo("elsewhere", "not mine")
	slices.Reverse(want)
	var got []int64
	cursor := ""
	for page := 0; page < 5; page++ {
		args := map[string]any{"limit": 2, "state": "pending"}
		if cursor != "" {
			args["cursor"] = cursor
		}
		var out struct {
			Todos      []store.Todo `json:"todos"`
			NextCursor string       `json:"next_cursor"`
		}
		c.ok(t, VerbListTodos, args, &out)
		for _, td := range out.Todos {
			got = append(got, td.ID)
		}
		if cursor = out.NextCursor; cursor == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pages gave %v, want %v", got, want)
	}
	// A page that holds the last row offers no next one (an empty page).
	var whole struct {
		Todos      []store.Todo `json:"todos"`
		NextCursor *string      `json:"next_cursor"`
	}
	c.ok(t, VerbListTodos, map[string]any{"limit": 5, "state": "pending"}, &whole)
	if len(whole.Todos) != 5 || whole.NextCursor != nil {
		t.Fatalf("a page of exactly every row: %d todos, next_cursor %v", len(whole.Todos), whole.NextCursor != nil)
	}
	if code := c.code(t, VerbListTodos, map[string]any{"cursor": "zzz"}); code != CodeInvalidArgument {
		t.Errorf("bad cursor: %s", code)
	}
	if code := c.code(t, VerbListTodos, map[string]any{"state": "lost"}); code != CodeInvalidArgument {
		t.Errorf("bad state: %s", code)
	}
}

func TestFailRetriesThenDeadLetters(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("failer", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	td := e.addTodo("inbox", "p")

	c.ok(t, VerbClaim, map[string]any{"todo_id": td.ID}, nil)
	var out struct {
		Todo         store.Todo `json:"todo"`
		DeadLettered bool       `json:"dead_lettered"`
	}
	c.ok(t, VerbFail, map[string]any{"todo_id": td.ID, "error": "flaky"}, &out)
	if out.DeadLettered || out.Todo.State != store.StatePending || !out.Todo.AvailableAt.After(e.clock.Now()) {
		t.Fatalf("retry fail = %+v", out)
	}
	// Backing off: not claimable until the backoff passes.
	if code := c.code(t, VerbClaim, map[string]any{"todo_id": td.ID}); code != CodeConflict {
		t.Fatalf("claim during backoff: %s", code)
	}
	e.clock.Add(store.RetryBackoff(1))
	c.ok(t, VerbClaim, map[string]any{"todo_id": td.ID}, nil)
	c.ok(t, VerbFail, map[string]any{"todo_id": td.ID, "error": "broken for good", "retry": false}, &out)
	if !out.DeadLettered || out.Todo.State != store.StateFailed {
		t.Fatalf("retry=false fail = %+v", out)
	}
	if code := c.code(t, VerbFail, map[string]any{"todo_id": td.ID}); code != CodeInvalidArgument {
		t.Fatalf("fail without error: %s", code)
	}
}

func TestReleaseHandsBackAtOnce(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("releaser", []string{"inbox"}, nil)
	a, b := e.dial(cred, false), e.dial(cred, false)
	td := e.addTodo("inbox", "p")
	a.ok(t, VerbClaimNext, nil, nil)
	var out struct {
		Todo store.Todo `json:"todo"`
	}
	a.ok(t, VerbRelease, map[string]any{"todo_id": td.ID}, &out)
	if out.Todo.State != store.StatePending || out.Todo.Attempts != 0 {
		t.Fatalf("released = %s attempts %d", out.Todo.State, out.Todo.Attempts)
	}
	var again struct {
		Claimed bool `json:"claimed"`
	}
	b.ok(t, VerbClaimNext, nil, &again)
	if !again.Claimed {
		t.Fatal("released todo was not claimable at once")
	}
}

func TestBadInput(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("careless", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	td := e.addTodo("inbox", "p")
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{VerbClaim, map[string]any{"todo_id": 999999}, CodeNotFound},
		{VerbClaim, map[string]any{}, CodeInvalidArgument},
		{VerbClaim, map[string]any{"todo_id": "one"}, CodeInvalidArgument},
		{VerbClaim, map[string]any{"todo_id": td.ID, "lease_ttl_seconds": -5}, CodeInvalidArgument},
		{VerbClaim, map[string]any{"todo_id": td.ID, "lease_ttl_seconds": "300"}, CodeInvalidArgument},
		{VerbClaim, map[string]any{"todo_id": td.ID, "lease_ttl_seconds": 1.5}, CodeInvalidArgument},
		{VerbClaimNext, map[string]any{"lease_ttl_seconds": 0}, CodeInvalidArgument},
		{VerbClaimNext, map[string]any{"surprise": true}, CodeInvalidArgument},
		{VerbHeartbeat, map[string]any{"todo_id": td.ID}, CodeConflict}, // not claimed
		{VerbComplete, map[string]any{"todo_id": td.ID, "lease_seq": 0}, CodeInvalidArgument},
		{VerbSetDefaultLease, map[string]any{"default_lease_ttl_seconds": MaxLeaseSeconds + 1}, CodeInvalidArgument},
		{VerbSetDefaultLease, map[string]any{}, CodeInvalidArgument},
	}
	for _, tc := range cases {
		if got := c.code(t, tc.tool, tc.args); got != tc.want {
			t.Errorf("%s %v: code %s, want %s", tc.tool, tc.args, got, tc.want)
		}
	}
	if got := e.todo(td.ID); got.State != store.StatePending {
		t.Fatalf("bad input changed the todo: %s", got.State)
	}
}
