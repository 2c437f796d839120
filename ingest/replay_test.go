package ingest

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// capture is one request as it went over the wire, which whoever sees it (a proxy's
// log, a leaked capture) can send again.
type capture struct {
	h    http.Header
	body []byte
}

// send posts c to token with Content-Type contentType, the headers edited by edit.
func (r *rig) send(token string, c capture, contentType string, edit func(http.Header)) reply {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodPost, URL(r.srv.URL, token), bytes.NewReader(c.body))
	if err != nil {
		r.t.Fatal(err)
	}
	req.Header = c.h.Clone()
	req.Header.Set("Content-Type", contentType)
	if edit != nil {
		edit(req.Header)
	}
	return r.do(req)
}

// isRedelivery fails the test unless got is what a redelivery of first answers: 200,
// duplicate, the first delivery's event and todo.
func isRedelivery(t *testing.T, what string, first, got reply) {
	t.Helper()
	if first.status != http.StatusAccepted {
		t.Fatalf("%s: the first delivery got %d %v", what, first.status, first.body)
	}
	if got.status != http.StatusOK || got.body["duplicate"] != true ||
		id(got.body["event_id"]) != id(first.body["event_id"]) || id(got.body["todo_id"]) != id(first.body["todo_id"]) {
		t.Fatalf("%s: %d %v, want the redelivery answer for %v", what, got.status, got.body, first.body)
	}
}

func (r *rig) wantTodos(n int) {
	r.t.Helper()
	if got := r.count("todos"); got != n {
		r.t.Fatalf("%d todos, want %d", got, n)
	}
}

// A slash command carries no event_id: its replay within the tolerance, the same
// signed timestamp and form body, is the command the user typed once.
func TestReplayOfSlashCommandIsARedelivery(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	hook, secret := r.webhook("slack", "inbox")
	body := []byte("token=legacy&team_id=T0001&command=%2Fdeploy&text=prod&trigger_id=13345224609.738474920.8088930838d88f008e0")
	c := capture{r.signed("slack", secret, "", body), body}
	const form = "application/x-www-form-urlencoded"
	first := r.send(hook.Token, c, form, nil)
	r.clock.Add(Tolerance - time.Second)
	isRedelivery(t, "the slash command replayed", first, r.send(hook.Token, c, form, nil))
	r.wantTodos(1)
	// Past the tolerance the signed timestamp itself refuses it.
	r.clock.Add(2 * time.Second)
	if got := r.send(hook.Token, c, form, nil); got.status != http.StatusUnauthorized {
		t.Fatalf("the replay past the tolerance: %d %v", got.status, got.body)
	}
	r.wantTodos(1)
}

// A Stripe body without "id" gives no delivery id: its replay, the same t= and body,
// is a redelivery.
func TestReplayOfStripeBodyWithoutIDIsARedelivery(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	hook, secret := r.webhook("stripe", "payments")
	body := []byte(`{"object":"event","type":"invoice.paid","data":{"object":{"amount_paid":4200}}}`)
	c := capture{r.signed("stripe", secret, "", body), body}
	first := r.send(hook.Token, c, "application/json", nil)
	r.clock.Add(time.Minute)
	isRedelivery(t, "the Stripe body replayed", first, r.send(hook.Token, c, "application/json", nil))
	r.wantTodos(1)
}

// GitHub signs the body only: X-GitHub-Delivery can be changed or left out by
// whoever replays a captured body and signature, and the replay is still one.
func TestReplayOfGitHubSignatureUnderAnotherDeliveryID(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	hook, secret := r.webhook("github", "inbox")
	body := []byte(`{"action":"opened","issue":{"number":7}}`)
	c := capture{r.signed("github", secret, "72d3162e-cc78-11e3-81ab-4c9367dc0958", body), body}
	c.h.Set("X-GitHub-Event", "issues")
	first := r.send(hook.Token, c, "application/json", nil)
	// Long past the 300 s tolerance: GitHub signs no timestamp, so the replay
	// window alone decides (after it, see TestGitHubRepeatedDispatchMakesATodoEachTime).
	r.clock.Add(store.ReplayWindow - time.Minute)
	isRedelivery(t, "a new X-GitHub-Delivery", first, r.send(hook.Token, c, "application/json", func(h http.Header) {
		h.Set("X-GitHub-Delivery", "00000000-0000-0000-0000-000000000001")
	}))
	isRedelivery(t, "no X-GitHub-Delivery", first, r.send(hook.Token, c, "application/json", func(h http.Header) {
		h.Del("X-GitHub-Delivery")
	}))
	isRedelivery(t, "GitHub's own redelivery", first, r.send(hook.Token, c, "application/json", nil))
	r.wantTodos(1)
}

// Every scheme: a replay of a captured delivery, with what the scheme leaves
// unsigned changed, answers as a redelivery. GitLab's token signs nothing, so its
// idempotency key alone decides (see gitlab.go).
func TestReplayOfEverySchemeIsARedelivery(t *testing.T) {
	cases := []struct {
		source, id, body string
		edit             func(http.Header) // what a replayer may change and still pass
	}{
		{"github", "g-1", `{"action":"closed"}`, func(h http.Header) { h.Set("X-GitHub-Delivery", "g-2") }},
		{"stripe", "", `{"id":"evt_1","type":"charge.succeeded"}`, nil},
		{"stripe", "", `{"type":"charge.succeeded"}`, nil},
		{"slack", "", `{"type":"event_callback","event_id":"Ev1","event":{"type":"message"}}`, nil},
		{"slack", "", "payload=%7B%22type%22%3A%22block_actions%22%7D", nil},
		{"standard", "msg_1", `{"type":"user.created"}`, nil},
		{"gitlab", "b5a2e7c0-0000-0000-0000-000000000001", `{"object_kind":"push"}`, nil},
		{"generic", "x-1", `{"n":1}`, func(h http.Header) { h.Set("X-Delivery-Id", "x-2") }},
		{"generic", "", `{"n":2}`, func(h http.Header) { h.Set("X-Delivery-Id", "x-3") }},
	}
	r := newRig(t, ReceiverOptions{})
	for _, c := range cases {
		t.Run(c.source, func(t *testing.T) {
			hook, secret := r.webhook(c.source, "inbox")
			body := []byte(c.body)
			cp := capture{r.signed(c.source, secret, c.id, body), body}
			if c.source == "generic" && c.id != "" {
				cp.h.Set("X-Delivery-Id", c.id)
			}
			first := r.send(hook.Token, cp, "application/json", nil)
			r.clock.Add(time.Minute)
			isRedelivery(t, "replayed as captured", first, r.send(hook.Token, cp, "application/json", nil))
			if c.edit != nil {
				isRedelivery(t, "replayed with its unsigned id changed", first, r.send(hook.Token, cp, "application/json", c.edit))
			}
		})
	}
	r.wantTodos(len(cases))
}

// Deliveries that differ in what is signed are never taken for replays of one
// another, whatever their unsigned headers say, and a webhook's replay keys are its
// own.
func TestDistinctDeliveriesEachMakeATodo(t *testing.T) {
	type delivery struct{ id, body string }
	cases := []struct {
		source string
		a, b   delivery
		later  time.Duration // b is signed this much after a
	}{
		{"github", delivery{"g-1", `{"n":1}`}, delivery{"g-2", `{"n":2}`}, 0},
		{"github", delivery{"", `{"n":1}`}, delivery{"", `{"n":2}`}, 0},
		// Slack signs the timestamp: the same command typed twice is two.
		{"slack", delivery{"", "command=%2Fdeploy&text=prod"}, delivery{"", "command=%2Fdeploy&text=prod"}, time.Second},
		{"slack", delivery{"", "command=%2Fdeploy&text=prod"}, delivery{"", "command=%2Fdeploy&text=staging"}, 0},
		{"stripe", delivery{"", `{"type":"a"}`}, delivery{"", `{"type":"a"}`}, time.Second},
		{"stripe", delivery{"", `{"type":"a"}`}, delivery{"", `{"type":"b"}`}, 0},
		// Stripe's retry of an event re-signs it: its id makes it one delivery.
		{"stripe", delivery{"", `{"id":"evt_1","type":"a"}`}, delivery{"", `{"id":"evt_2","type":"a"}`}, 0},
		{"standard", delivery{"msg_1", `{"type":"a"}`}, delivery{"msg_2", `{"type":"a"}`}, 0},
		{"gitlab", delivery{"u-1", `{"object_kind":"push"}`}, delivery{"u-2", `{"object_kind":"push"}`}, 0},
		{"generic", delivery{"x-1", `{"n":1}`}, delivery{"x-1b", `{"n":2}`}, 0},
	}
	r := newRig(t, ReceiverOptions{})
	for _, c := range cases {
		t.Run(c.source, func(t *testing.T) {
			hook, secret := r.webhook(c.source, "inbox")
			post := func(d delivery) reply {
				h := r.signed(c.source, secret, d.id, []byte(d.body))
				if c.source == "generic" {
					h.Set("X-Delivery-Id", d.id)
				}
				return r.post(hook.Token, h, []byte(d.body))
			}
			first := post(c.a)
			r.clock.Add(c.later)
			second := post(c.b)
			if first.status != http.StatusAccepted || second.status != http.StatusAccepted ||
				id(first.body["todo_id"]) == id(second.body["todo_id"]) {
				t.Fatalf("two deliveries: %d %v and %d %v, want two new todos", first.status, first.body, second.status, second.body)
			}
		})
	}
	r.wantTodos(2 * len(cases))

	// The same body signed for two webhooks is a delivery to each.
	body := []byte(`{"action":"opened"}`)
	for range 2 {
		hook, secret := r.webhook("github", "inbox")
		if got := r.post(hook.Token, r.signed("github", secret, "same", body), body); got.status != http.StatusAccepted {
			t.Fatalf("the body to a second webhook: %d %v", got.status, got.body)
		}
	}
	r.wantTodos(2*len(cases) + 2)
}

// The event that holds a replay key outlives every replay its signed timestamp
// still admits, whatever --event-retention says.
func TestReplayWindowCoversTheTolerance(t *testing.T) {
	// A timestamp may be Tolerance ahead when it arrives and is accepted until
	// Tolerance (and a second of truncation) after it.
	if need := 2*Tolerance + time.Second; store.ReplayWindow <= need {
		t.Fatalf("store.ReplayWindow %v, want more than %v", store.ReplayWindow, need)
	}
}
