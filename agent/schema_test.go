package agent

import (
	"encoding/json"
	"net/http"
	"slices"
	"testing"

	"github.com/switchboardhq/switchboard/store"
)

// Every verb lists an outputSchema, and answers within it on each of its paths
// (agentClient.call checks every successful answer a test gets against the
// schema the session listed; this test makes sure each verb is called).
func TestEveryVerbAnswersWithinItsOutputSchema(t *testing.T) {
	h := newHookEnv(t)
	_, bot := h.botEndpoint("tourist")
	listed, err := bot.listedOutputSchemas()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for name, raw := range listed {
		names = append(names, name)
		var schema struct {
			Type  string           `json:"type"`
			AnyOf []map[string]any `json:"anyOf"`
		}
		if err := json.Unmarshal(raw, &schema); err != nil || schema.Type != "object" || len(schema.AnyOf) != 2 {
			t.Errorf("%s lists no outputSchema of a result or a refusal: %s", name, raw)
		}
	}
	slices.Sort(names)
	all := store.AllVerbs()
	slices.Sort(all)
	if !slices.Equal(names, all) {
		t.Fatalf("listed %v, want every verb %v", names, all)
	}

	called := map[string]bool{}
	ok := func(tool string, args map[string]any, out any) {
		t.Helper()
		bot.ok(t, tool, args, out)
		called[tool] = true
	}
	// The queue, both ways: nothing to claim, then a todo through every verb.
	var none claimResult
	ok(VerbClaimNext, map[string]any{}, &none)
	if none.Claimed || none.Message == "" {
		t.Fatalf("claim_next on an empty queue: %+v", none)
	}
	first, second := h.addTodo("inbox", `{"n":1}`), h.addTodo("inbox", "\xff binary")
	ok(VerbListTodos, map[string]any{"limit": 1}, nil)
	ok(VerbClaim, map[string]any{"todo_id": first.ID}, nil)
	ok(VerbHeartbeat, map[string]any{"todo_id": first.ID}, nil)
	ok(VerbRelease, map[string]any{"todo_id": first.ID}, nil)
	ok(VerbClaimNext, map[string]any{}, nil)
	ok(VerbComplete, map[string]any{"todo_id": first.ID, "result": "done"}, nil)
	ok(VerbClaim, map[string]any{"todo_id": second.ID}, nil)
	ok(VerbFail, map[string]any{"todo_id": second.ID, "error": "broken", "retry": false}, nil)
	third := h.addTodo("inbox", `{"n":3}`)
	ok(VerbClaim, map[string]any{"todo_id": third.ID}, nil)
	ok(VerbRequestApproval, map[string]any{"todo_id": third.ID, "question": "go?"}, nil)
	ok(VerbListTodos, map[string]any{"state": "failed"}, nil)
	ok(VerbGetDefaultLease, map[string]any{}, nil)
	ok(VerbSetDefaultLease, map[string]any{"default_lease_ttl_seconds": 60}, nil)

	// Webhooks: made, delivered to, read, replayed, rotated, deleted.
	var hook createdHook
	ok(VerbCreateWebhook, map[string]any{"source_type": "github", "queue": "inbox", "description": "tour"}, &hook)
	code, ans := h.deliver(hook, hook.SigningSecret, "tour-1", []byte(`{"n":1}`))
	if code != http.StatusAccepted {
		t.Fatalf("delivery: %d %v", code, ans)
	}
	ok(VerbListWebhooks, map[string]any{}, nil)
	ok(VerbListWebhookEvents, map[string]any{"webhook_id": hook.WebhookID}, nil)
	ok(VerbGetWebhookEvent, map[string]any{"event_id": ans["event_id"]}, nil)
	ok(VerbReplayWebhookEvent, map[string]any{"event_id": ans["event_id"]}, nil)
	ok(VerbUpdateWebhook, map[string]any{"webhook_id": hook.WebhookID, "rules": map[string]any{
		"filter": map[string]any{"actions": []string{"opened"}}, "key": "{/repository/full_name}", "priority": 2}}, nil)
	ok(VerbRotateWebhook, map[string]any{"webhook_id": hook.WebhookID}, nil)
	ok(VerbDeleteWebhook, map[string]any{"webhook_id": hook.WebhookID}, nil)

	for _, v := range all {
		if !called[v] {
			t.Errorf("the tour never called %s", v)
		}
	}
}
