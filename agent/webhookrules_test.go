package agent

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/store"
)

// An agent sets its webhook's rules in create_webhook and changes them with
// update_webhook; bad rules and another endpoint's webhook are refused and
// change nothing.
func TestAgentSetsWebhookRules(t *testing.T) {
	ctx := context.Background()
	h := newHookEnv(t)
	_, bot := h.botEndpoint("bot")
	_, other := h.botEndpoint("other")
	var hook createdHook
	bot.ok(t, VerbCreateWebhook, map[string]any{"source_type": "github", "queue": "inbox",
		"rules": map[string]any{"filter": map[string]any{"events": []string{"pull_request"}}}}, &hook)
	// GitHub's push is not a pull_request: recorded, filtered, no todo.
	if code, ans := h.deliver(hook, hook.SigningSecret, "d-1", []byte(`{"n":1}`)); code != 202 || ans["filtered"] != true {
		t.Fatalf("push under a pull_request filter: %d %v", code, ans)
	}
	var row struct {
		Rules json.RawMessage `json:"rules"`
	}
	bot.ok(t, VerbUpdateWebhook, map[string]any{"webhook_id": hook.WebhookID, "rules": map[string]any{
		"key": "{/repo}", "coalesce": true, "priority": 3}}, &row)
	if !strings.Contains(string(row.Rules), `"coalesce":true`) {
		t.Fatalf("update_webhook answered rules %s", row.Rules)
	}
	for i, body := range []string{`{"repo": "a", "n": 2}`, `{"repo": "a", "n": 3}`} {
		if code, ans := h.deliver(hook, hook.SigningSecret, "d-"+string(rune('2'+i)), []byte(body)); code != 202 || ans["filtered"] == true {
			t.Fatalf("delivery %d under the new rules: %d %v", i, code, ans)
		}
	}
	todos, err := h.st.ListTodos(ctx, store.TodoFilter{})
	if err != nil || len(todos) != 1 || todos[0].Key != "a" || todos[0].Coalesced != 1 || todos[0].Priority != 3 {
		t.Fatalf("todos %+v (%v): want one of key a, coalesced once, priority 3", todos, err)
	}

	for _, c := range []struct {
		rules map[string]any
		want  string
	}{
		{map[string]any{"filter": map[string]any{"event": []string{"push"}}}, `unknown field "event"`},
		{map[string]any{"filter": map[string]any{"match": map[string]any{"repo": "a"}}}, `JSON pointer "repo" does not parse`},
		{map[string]any{"key": "repo"}, "has no {/json/pointer}"},
		{map[string]any{"key": "{/repo}", "priority": 99999}, "priority 99999"},
	} {
		p := bot.refusal(t, VerbUpdateWebhook, map[string]any{"webhook_id": hook.WebhookID, "rules": c.rules})
		if p.Code != CodeInvalidArgument || !strings.Contains(p.Message, c.want) {
			t.Errorf("rules %v: %s %q, want invalid_argument saying %q", c.rules, p.Code, p.Message, c.want)
		}
	}
	if code := other.code(t, VerbUpdateWebhook, map[string]any{"webhook_id": hook.WebhookID, "rules": map[string]any{}}); code != CodeNotFound {
		t.Fatalf("update_webhook on another endpoint's webhook: %s, want not_found", code)
	}
	if p := bot.refusal(t, VerbCreateWebhook, map[string]any{"source_type": "github", "queue": "inbox",
		"rules": map[string]any{"coalesce": true}}); p.Code != CodeInvalidArgument {
		t.Fatalf("create_webhook with bad rules: %+v", p)
	}
	hooks, err := h.st.ListWebhooks(ctx, store.WebhookFilter{})
	if err != nil || len(hooks) != 1 || hooks[0].Rules["coalesce"] != true {
		t.Fatalf("after the refusals: %+v (%v), want the one webhook with its rules as set", hooks, err)
	}
}
