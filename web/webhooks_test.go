package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// webhookWithEvents creates a webhook and records deliveries on it as the receiver
// would after verifying them.
func (f *fixture) webhookWithEvents(bodies ...string) (store.Webhook, []store.DeliveryResult) {
	f.t.Helper()
	h, err := f.st.CreateWebhook(f.t.Context(), store.NewWebhook{SourceType: "github", Queue: "github-issues",
		Secret: "a-signing-secret-of-some-length", CreatedBy: "agent:triage"})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []store.DeliveryResult
	for i, b := range bodies {
		f.clock.Add(time.Minute)
		res, err := f.st.RecordDelivery(f.t.Context(), store.NewDelivery{WebhookID: h.ID,
			DeliveryID: fmt.Sprintf("d-%d", i), EventType: "issues.opened", TrustMode: "signed",
			Headers: map[string]string{"X-GitHub-Event": "issues", "X-GitHub-Delivery": fmt.Sprintf("d-%d", i)},
			Body:    []byte(b)})
		if err != nil {
			f.t.Fatal(err)
		}
		out = append(out, res)
	}
	return h, out
}

type fakeFailures map[int64]int64

func (f fakeFailures) Failures(id int64) (int64, time.Time) {
	return f[id], time.Date(2026, 5, 1, 11, 0, 0, 0, time.UTC)
}

func TestWebhookList(t *testing.T) {
	f := newFixture(t, Options{BaseURL: "https://sb.example"})
	cookie, _ := f.login()
	h, _ := f.webhookWithEvents(`{"a":1}`, `{"a":2}`)
	f.clock.Add(2 * time.Minute)
	res, body := f.get("/webhooks", cookie)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	for _, want := range []string{
		"https://sb.example/webhooks/w/" + h.Token, // ingest URL
		">github<", ">github-issues<", "agent:triage",
		`<td data-label="Deliveries" class="num">2</td>`,
		"2m ago", // last delivery
		`title="refused deliveries are not tracked by this server"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("webhooks page lacks %q", want)
		}
	}

	f2 := newFixture(t, Options{Failures: fakeFailures{1: 7}})
	cookie2, _ := f2.login()
	f2.webhookWithEvents()
	if _, body := f2.get("/webhooks", cookie2); !strings.Contains(body, `>7</span>`) {
		t.Error("refused deliveries not shown when tracked")
	}
}

func TestDeleteWebhook(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	h, _ := f.webhookWithEvents(`{}`)
	res, _ := f.post(fmt.Sprintf("/webhook/%d/delete", h.ID), cookie, url.Values{csrfField: {csrf}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/webhooks?flash=deleted" {
		t.Fatalf("status %d Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	if _, _, err := f.st.WebhookByToken(t.Context(), h.Token); err == nil {
		t.Fatal("the webhook still takes deliveries")
	}
	rows := f.audited(fmt.Sprintf("webhook:%d", h.ID))
	if rows[0].Action != "webhook.delete" || rows[0].Actor != humanActor(f.human.ID) {
		t.Fatalf("audit %+v", rows[0])
	}
	if _, body := f.get("/webhooks", cookie); strings.Contains(body, fmt.Sprintf(`data-webhook-id="%d"`, h.ID)) {
		t.Fatal("deleted webhook listed as live")
	}
	if _, body := f.get("/webhooks?all=1", cookie); !strings.Contains(body, "deleted</span>") {
		t.Fatal("deleted webhook missing from ?all=1")
	}
	if res, _ := f.post(fmt.Sprintf("/webhook/%d/delete", h.ID), cookie, url.Values{csrfField: {csrf}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("second delete: %d", res.StatusCode)
	}
}

func TestWebhookEventsAndReplay(t *testing.T) {
	f := newFixture(t, Options{PageSize: 2})
	cookie, csrf := f.login()
	h, ev := f.webhookWithEvents(`{"issue":{"number":1}}`, "plain text", string([]byte{0xff, 0xfe, 0x00}))

	res, body := f.get(fmt.Sprintf("/webhook/%d", h.ID), cookie)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	// Newest first, a page at a time, with size and verification.
	if !strings.Contains(body, fmt.Sprintf(`data-event-id="%d"`, ev[2].EventID)) ||
		strings.Contains(body, fmt.Sprintf(`data-event-id="%d"`, ev[0].EventID)) || !strings.Contains(body, `rel="next"`) {
		t.Fatal("event page 1 wrong")
	}
	if !strings.Contains(body, "3 B") || !strings.Contains(body, "✓ verified") || !strings.Contains(body, "(signed)") {
		t.Fatal("event sizes or verification missing")
	}

	// An event's headers and body, the JSON pretty-printed, binary as base64.
	_, body = f.get(fmt.Sprintf("/events/%d", ev[0].EventID), cookie)
	for _, want := range []string{"X-GitHub-Delivery", "d-0", "{\n  &#34;issue&#34;: {", "issues.opened"} {
		if !strings.Contains(body, want) {
			t.Errorf("event page lacks %q", want)
		}
	}
	_, body = f.get(fmt.Sprintf("/events/%d", ev[2].EventID), cookie)
	if !strings.Contains(body, "//4A") || !strings.Contains(body, "shown as base64") {
		t.Error("binary body not shown as base64")
	}
	if res, _ := f.get("/events/99999", cookie); res.StatusCode != http.StatusNotFound {
		t.Errorf("unknown event: %d", res.StatusCode)
	}

	// Replay makes a new todo from the stored body, audited as the human.
	res, _ = f.post(fmt.Sprintf("/events/%d/replay", ev[0].EventID), cookie, url.Values{csrfField: {csrf}})
	var todoID int64
	if _, err := fmt.Sscanf(res.Header.Get("Location"), "/todos/%d?flash=replayed", &todoID); err != nil || res.StatusCode != http.StatusSeeOther {
		t.Fatalf("replay: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	td := f.todo(todoID)
	if td.ID == ev[0].TodoID || td.Payload != `{"issue":{"number":1}}` || td.Source.Type != "replay" || td.Source.EventID != ev[0].EventID || td.CreatedBy != humanActor(f.human.ID) {
		t.Fatalf("replayed todo %+v", td)
	}
	rows := f.audited(fmt.Sprintf("webhook_event:%d", ev[0].EventID))
	if len(rows) != 1 || rows[0].Action != "webhook_event.replay" || rows[0].Actor != humanActor(f.human.ID) {
		t.Fatalf("audit %+v", rows)
	}
}
