package agent

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// add_todo over real MCP: not listed by default; granted, it adds only to the
// endpoint's add queues, and the todo's trust envelope names the agent.
func TestAddTodoHandsWorkOn(t *testing.T) {
	e := newEnv(t)
	_, plainCred := e.endpoint("plain", []string{"inbox"}, nil)
	if names := e.dial(plainCred, false).toolNames(t); slices.Contains(names, VerbAddTodo) {
		t.Fatalf("add_todo is listed for an endpoint that was not granted it: %v", names)
	}
	verbs := append(store.AllVerbs(), VerbAddTodo)
	_, cred := e.endpoint("triager", []string{"inbox"}, verbs, func(s *store.EndpointSpec) {
		s.AddQueues = &[]string{"review"}
	})
	c := e.dial(cred, false)
	if code := c.code(t, VerbAddTodo, map[string]any{"queue": "inbox", "payload": "{}"}); code != CodeForbidden {
		t.Fatalf("add_todo outside the add queues: %s, want forbidden", code)
	}
	if code := c.code(t, VerbAddTodo, map[string]any{"queue": "review"}); code != CodeInvalidArgument {
		t.Fatalf("add_todo without a payload: %s, want invalid_argument", code)
	}
	if counts, _ := e.st.QueueCounts(context.Background()); len(counts) != 0 {
		t.Fatalf("a refused add left todos: %+v", counts)
	}
	var added addedResult
	c.ok(t, VerbAddTodo, map[string]any{"queue": "review", "payload": `{"pr": 9}`}, &added)
	got := e.todo(added.Todo.ID)
	if got.Queue != "review" || got.Payload != `{"pr": 9}` || got.Source.Type != "agent" ||
		got.Trust.Mode != "agent" || got.Trust.Verified || got.Trust.AddedBy != "agent:triager" {
		t.Fatalf("the added todo = %+v", got)
	}
}

// add_todo takes a key, a priority and a delay, as todo add does; one out of
// range is refused and adds nothing.
func TestAddTodoFlowOptions(t *testing.T) {
	e := newEnv(t)
	verbs := append(store.AllVerbs(), VerbAddTodo)
	_, cred := e.endpoint("triager", []string{"inbox"}, verbs, func(s *store.EndpointSpec) {
		s.AddQueues = &[]string{"review"}
	})
	c := e.dial(cred, false)
	if code := c.code(t, VerbAddTodo, map[string]any{"queue": "review", "payload": "{}", "priority": 5000}); code != CodeInvalidArgument {
		t.Fatalf("add_todo with priority 5000: %s, want invalid_argument", code)
	}
	// A delay past any duration is refused for its seconds, not for what they
	// overflowed to.
	res, err := c.call(VerbAddTodo, map[string]any{"queue": "review", "payload": "{}", "delay_seconds": 1e300})
	if err != nil || !res.IsError || !strings.Contains(text(res), "delay_seconds 1e+300: must be from 0 to 2592000") {
		t.Fatalf("add_todo with delay_seconds 1e300: %v, %s", err, text(res))
	}
	res, err = c.call(VerbAddTodo, map[string]any{"queue": "review", "payload": "{}", "delay_seconds": 2592000.5})
	if err != nil || !res.IsError || !strings.Contains(text(res), "delay_seconds 2592000.5: must be from 0 to 2592000") {
		t.Fatalf("add_todo with delay_seconds 2592000.5: %v, %s", err, text(res))
	}
	if counts, _ := e.st.QueueCounts(context.Background()); len(counts) != 0 {
		t.Fatalf("a refused add left todos: %+v", counts)
	}
	var added addedResult
	c.ok(t, VerbAddTodo, map[string]any{"queue": "review", "payload": "{}", "key": "octo/repo#7",
		"priority": 3, "delay_seconds": 60}, &added)
	got := e.todo(added.Todo.ID)
	if got.Key != "octo/repo#7" || got.Priority != 3 || !got.AvailableAt.After(got.CreatedAt.Add(59*time.Second)) {
		t.Fatalf("the added todo: key %q priority %d available %s created %s", got.Key, got.Priority, got.AvailableAt, got.CreatedAt)
	}
}
