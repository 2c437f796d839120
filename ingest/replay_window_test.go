package ingest

import (
	"net/http"
	"testing"
	"time"
)

// GitHub sends identical bodies for distinct events: two repository_dispatch (or
// workflow_dispatch) triggers with the same event_type and client_payload carry no
// id or timestamp of their own in the body (repository.pushed_at/updated_at move
// only on a push or an edit). Each has its own X-GitHub-Delivery, and each is a
// job the producer asked for: the second must not be answered "duplicate" and
// dropped, least of all a day later.
func TestGitHubRepeatedDispatchMakesATodoEachTime(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	hook, secret := r.webhook("github", "inbox")
	body := []byte(`{"action":"rebuild-docs","branch":"main","client_payload":{},` +
		`"repository":{"id":1296269,"full_name":"octo/docs","pushed_at":"2026-11-30T10:00:00Z","updated_at":"2026-11-30T10:00:00Z"},` +
		`"sender":{"login":"octocat","id":1}}`)
	post := func(guid string) reply {
		h := r.signed("github", secret, guid, body)
		h.Set("X-GitHub-Event", "repository_dispatch")
		return r.post(hook.Token, h, body)
	}
	first := post("3c5a2c30-0000-11f0-8000-000000000001")
	r.clock.Add(24 * time.Hour)
	second := post("9e1b7d40-0001-11f0-8000-000000000002")
	if first.status != http.StatusAccepted || second.status != http.StatusAccepted {
		t.Fatalf("two dispatches a day apart, each its own X-GitHub-Delivery: %d %v and %d %v, want two new todos",
			first.status, first.body, second.status, second.body)
	}
	r.wantTodos(2)
}
