package web

import (
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
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

func (f fakeFailures) Failures(id int64) (int64, time.Time, string) {
	return f[id], time.Date(2026, 5, 1, 11, 0, 0, 0, time.UTC), "github: signature does not match <the secret>"
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
	if _, body := f2.get("/webhooks", cookie2); !strings.Contains(body, `>7</span>`) ||
		!strings.Contains(body, `: github: signature does not match &lt;the secret&gt;">7`) {
		t.Error("refused deliveries and the last one's reason (escaped) not shown when tracked")
	}
}

func TestDeleteWebhook(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	h, _ := f.webhookWithEvents(`{}`)
	res, _ := f.post(fmt.Sprintf("/webhook/%d/delete", h.ID), cookie, url.Values{csrfField: {csrf}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/webhooks" {
		t.Fatalf("status %d Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	if _, _, err := f.st.WebhookByToken(t.Context(), h.Token); err == nil {
		t.Fatal("the webhook still takes deliveries")
	}
	rows := f.audited(fmt.Sprintf("webhook:%d", h.ID))
	if rows[0].Action != "webhook.delete" || rows[0].Actor != store.OperatorActor(f.human.ID) {
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
	if _, err := fmt.Sscanf(res.Header.Get("Location"), "/todos/%d", &todoID); err != nil || res.StatusCode != http.StatusSeeOther {
		t.Fatalf("replay: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	td := f.todo(todoID)
	if td.ID == ev[0].TodoID || td.Payload != `{"issue":{"number":1}}` || td.Source.Type != "replay" || td.Source.EventID != ev[0].EventID || td.CreatedBy != store.OperatorActor(f.human.ID) {
		t.Fatalf("replayed todo %+v", td)
	}
	rows := f.audited(fmt.Sprintf("webhook_event:%d", ev[0].EventID))
	if len(rows) != 1 || rows[0].Action != "webhook_event.replay" || rows[0].Actor != store.OperatorActor(f.human.ID) {
		t.Fatalf("audit %+v", rows)
	}
}

var (
	shownSecret    = regexp.MustCompile(`id="signing-secret">([^<]+)</pre>`)
	shownIngestURL = regexp.MustCompile(`id="ingest-url">([^<]+)</pre>`)
	onceField      = regexp.MustCompile(`name="once" value="([^"]+)"`)
)

// onceToken reads the one-time token of the form on the page at path.
func (f *fixture) onceToken(path string, cookie *http.Cookie) string {
	f.t.Helper()
	_, body := f.get(path, cookie)
	m := onceField.FindStringSubmatch(body)
	if m == nil {
		f.t.Fatalf("%s has no form with a one-time token", path)
	}
	return m[1]
}

// A form that mints a secret, sent twice (a double click, a resubmission after
// Back), acts once, and both answers show the one secret it minted: a second
// webhook is not created, and a second rotation does not end at once the
// secret the producer still signs with.
func TestSecretFormsActOnce(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()

	form := url.Values{csrfField: {csrf}, "source": {"github"}, "queue": {"inbox"}, "once": {f.onceToken("/webhooks", cookie)}}
	_, first := f.post("/webhooks", cookie, form)
	_, second := f.post("/webhooks", cookie, form)
	list, err := f.st.ListWebhooks(t.Context(), store.WebhookFilter{})
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := shownSecret.FindStringSubmatch(first), shownSecret.FindStringSubmatch(second)
	if len(list) != 1 || s1 == nil || s2 == nil || s1[1] != s2[1] {
		t.Fatalf("a create sent twice: %d webhooks, secrets shown %v and %v", len(list), s1, s2)
	}
	// A fresh token is a new form: it acts.
	form.Set("once", f.onceToken("/webhooks", cookie))
	f.post("/webhooks", cookie, form)
	if list, _ := f.st.ListWebhooks(t.Context(), store.WebhookFilter{}); len(list) != 2 {
		t.Fatalf("a second form created %d webhooks in all, want 2", len(list))
	}

	h := list[0]
	page := fmt.Sprintf("/webhook/%d", h.ID)
	rot := url.Values{csrfField: {csrf}, "grace": {"24h"}, "once": {f.onceToken(page, cookie)}}
	_, first = f.post(page+"/rotate", cookie, rot)
	_, second = f.post(page+"/rotate", cookie, rot)
	s1, s2 = shownSecret.FindStringSubmatch(first), shownSecret.FindStringSubmatch(second)
	_, secrets, _ := f.st.WebhookByToken(t.Context(), h.Token)
	if s1 == nil || s2 == nil || s1[1] != s2[1] || len(secrets) != 2 || secrets[0] != s1[1] || secrets[1] == s1[1] {
		t.Fatalf("a rotation sent twice: shown %v and %v, verifying %v", s1, s2, secrets)
	}
	if rows := f.audited(fmt.Sprintf("webhook:%d", h.ID)); len(rows) != 2 {
		t.Fatalf("audit after one create and one rotation: %+v", rows)
	}

	// The token answers only the session that loaded the form.
	other, otherCSRF := f.login()
	rot.Set(csrfField, otherCSRF)
	_, third := f.post(page+"/rotate", other, rot)
	if s3 := shownSecret.FindStringSubmatch(third); s3 == nil || s3[1] == s1[1] {
		t.Fatalf("another session's resubmission showed this one's secret")
	}
}

// An operator creates a webhook from the board: the ingest URL and the secret are
// shown once, and the secret is the one the receiver will verify with.
func TestCreateWebhookFromBoard(t *testing.T) {
	f := newFixture(t, Options{BaseURL: "https://sb.example"})
	cookie, csrf := f.login()
	if _, body := f.get("/webhooks", cookie); !strings.Contains(body, `action="/webhooks"`) || !strings.Contains(body, `<option value="standard">`) {
		t.Fatal("the webhooks page has no New webhook form with the source types")
	}
	created := func() []store.Webhook {
		t.Helper()
		list, err := f.st.ListWebhooks(t.Context(), store.WebhookFilter{})
		if err != nil {
			t.Fatal(err)
		}
		return list
	}

	// Refused, and nothing created: no CSRF token, a bad source, a bad queue, a
	// pasted secret the scheme cannot sign with.
	res := f.do(http.MethodPost, "/webhooks", cookie, url.Values{"source": {"github"}, "queue": {"inbox"}}, nil)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("without the CSRF token: %d", res.StatusCode)
	}
	for name, form := range map[string]url.Values{
		"unknown source": {"source": {"myspace"}, "queue": {"inbox"}},
		"bad queue":      {"source": {"github"}, "queue": {"in box"}},
		"bad secret":     {"source": {"standard"}, "queue": {"inbox"}, "signing_secret": {"whsec_!!!!notbase64!!!!"}},
		"short secret":   {"source": {"stripe"}, "queue": {"inbox"}, "signing_secret": {"whsec"}},
	} {
		form.Set(csrfField, csrf)
		form.Set("description", "kept <as typed>")
		res, body := f.post("/webhooks", cookie, form)
		// The form comes back open, filled in (but for the secret), with the reason.
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `class="flash err"`) ||
			!strings.Contains(body, `id="new-webhook" open`) || !strings.Contains(body, `value="kept &lt;as typed&gt;"`) ||
			!strings.Contains(body, fmt.Sprintf(`value="%s"`, template.HTMLEscapeString(form.Get("queue")))) {
			t.Errorf("%s: status %d\n%s", name, res.StatusCode, body)
		}
		if secret := form.Get("signing_secret"); secret != "" && strings.Contains(body, secret) {
			t.Errorf("%s: the refused secret is shown back", name)
		}
		if want := "Pick a source type: github, stripe, slack, standard, gitlab, generic."; name == "unknown source" && !strings.Contains(body, want) {
			t.Errorf("%s: the page does not say %s", name, want)
		}
	}
	if n := len(created()); n != 0 {
		t.Fatalf("refused forms created %d webhooks", n)
	}

	res, body := f.post("/webhooks", cookie, url.Values{csrfField: {csrf}, "source": {"github"}, "queue": {"github-issues"},
		"description": {"issues from the app repo"}})
	if res.StatusCode != http.StatusOK {
		t.Fatalf("create: status %d\n%s", res.StatusCode, body)
	}
	list := created()
	if len(list) != 1 || list[0].SourceType != "github" || list[0].Queue != "github-issues" || list[0].Description != "issues from the app repo" ||
		list[0].CreatedBy != store.OperatorActor(f.human.ID) || list[0].EndpointID != 0 {
		t.Fatalf("created %+v", list)
	}
	h := list[0]
	u, sec := shownIngestURL.FindStringSubmatch(body), shownSecret.FindStringSubmatch(body)
	if u == nil || u[1] != "https://sb.example/webhooks/w/"+h.Token || sec == nil {
		t.Fatalf("the page does not show the ingest URL and the secret:\n%s", body)
	}
	if _, secrets, err := f.st.WebhookByToken(t.Context(), h.Token); err != nil || len(secrets) != 1 || secrets[0] != sec[1] {
		t.Fatalf("shown secret %q, stored %v (%v)", sec[1], secrets, err)
	}
	if rows := f.audited(fmt.Sprintf("webhook:%d", h.ID)); len(rows) != 1 || rows[0].Action != "webhook.create" || rows[0].Actor != store.OperatorActor(f.human.ID) {
		t.Fatalf("audit %+v", rows)
	}
	if _, page := f.get(fmt.Sprintf("/webhook/%d", h.ID), cookie); strings.Contains(page, sec[1]) {
		t.Fatal("the webhook's page shows the secret again")
	}

	// Stripe mints its own: a minted one comes with that warning; a pasted one is
	// stored and not shown back.
	_, body = f.post("/webhooks", cookie, url.Values{csrfField: {csrf}, "source": {"stripe"}, "queue": {"payments"}})
	if !strings.Contains(body, "Stripe mints its own signing secret") || shownSecret.FindStringSubmatch(body) == nil {
		t.Fatalf("a minted Stripe secret without the warning:\n%s", body)
	}
	const stripes = "whsec_0123456789abcdefghijklmnop"
	res, body = f.post("/webhooks", cookie, url.Values{csrfField: {csrf}, "source": {"stripe"}, "queue": {"payments"}, "signing_secret": {" " + stripes + "\n"}})
	if res.StatusCode != http.StatusOK || strings.Contains(body, stripes) || !strings.Contains(body, "the one you pasted") {
		t.Fatalf("a pasted secret: status %d, shown back: %v", res.StatusCode, strings.Contains(body, stripes))
	}
	tok := strings.TrimPrefix(shownIngestURL.FindStringSubmatch(body)[1], "https://sb.example/webhooks/w/")
	if _, secrets, err := f.st.WebhookByToken(t.Context(), tok); err != nil || len(secrets) != 1 || secrets[0] != stripes {
		t.Fatalf("pasted secret stored as %v (%v)", secrets, err)
	}
}

// Rotating from the board shows the new secret once; the old one verifies for
// the grace picked, or not at all.
func TestRotateWebhookFromBoard(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	h, _ := f.webhookWithEvents()
	path := fmt.Sprintf("/webhook/%d/rotate", h.ID)
	if _, page := f.get(fmt.Sprintf("/webhook/%d", h.ID), cookie); !strings.Contains(page, `action="`+path+`"`) || !strings.Contains(page, `<option value="24h">24 hours</option>`) {
		t.Fatal("the webhook's page has no Rotate form")
	}
	if res, _ := f.post(path, cookie, url.Values{csrfField: {csrf}, "grace": {"forever"}}); res.StatusCode != http.StatusBadRequest {
		t.Fatalf("a bad grace: %d", res.StatusCode)
	}
	res, body := f.post(path, cookie, url.Values{csrfField: {csrf}, "grace": {"1h"}, "signing_secret": {"short"}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `id="rotate-webhook" open`) ||
		!strings.Contains(body, `<option value="1h" selected>`) || !strings.Contains(body, "The signing secret was refused") {
		t.Fatalf("a refused secret: status %d\n%s", res.StatusCode, body)
	}
	if _, secrets, _ := f.st.WebhookByToken(t.Context(), h.Token); len(secrets) != 1 || secrets[0] != "a-signing-secret-of-some-length" {
		t.Fatalf("a refused rotation changed the secrets: %v", secrets)
	}

	res, body = f.post(path, cookie, url.Values{csrfField: {csrf}, "grace": {"1h"}})
	sec := shownSecret.FindStringSubmatch(body)
	if res.StatusCode != http.StatusOK || sec == nil || !strings.Contains(body, "keeps verifying for 1 hour") {
		t.Fatalf("rotate: status %d\n%s", res.StatusCode, body)
	}
	if _, secrets, _ := f.st.WebhookByToken(t.Context(), h.Token); len(secrets) != 2 || secrets[0] != sec[1] || secrets[1] != "a-signing-secret-of-some-length" {
		t.Fatalf("after a rotation with 1h of grace: %v", secrets)
	}
	// While the old secret verifies, the page says until when, and that a second
	// rotation would end it.
	if _, page := f.get(fmt.Sprintf("/webhook/%d", h.ID), cookie); !strings.Contains(page, "the one before stops verifying <time") ||
		!strings.Contains(page, "rotating again ends that one now") {
		t.Fatalf("the page during the grace:\n%s", page)
	}
	f.clock.Add(61 * time.Minute)
	if _, page := f.get(fmt.Sprintf("/webhook/%d", h.ID), cookie); strings.Contains(page, "the one before stops verifying <time") ||
		strings.Contains(page, "rotating again ends that one now") {
		t.Fatal("the page after the grace still speaks of the old secret")
	}
	if _, secrets, _ := f.st.WebhookByToken(t.Context(), h.Token); len(secrets) != 1 {
		t.Fatalf("the old secret outlived its grace: %v", secrets)
	}

	_, body = f.post(path, cookie, url.Values{csrfField: {csrf}, "grace": {"0s"}})
	sec = shownSecret.FindStringSubmatch(body)
	if _, secrets, _ := f.st.WebhookByToken(t.Context(), h.Token); sec == nil || len(secrets) != 1 || secrets[0] != sec[1] || !strings.Contains(body, "stops verifying at once") {
		t.Fatalf("after a rotation without grace: %v", secrets)
	}
	if rows := f.audited(fmt.Sprintf("webhook:%d", h.ID)); rows[0].Action != "webhook.rotate" || rows[0].Actor != store.OperatorActor(f.human.ID) {
		t.Fatalf("audit %+v", rows[0])
	}

	if err := f.st.DeleteWebhook(t.Context(), h.ID, 0, "human:1"); err != nil {
		t.Fatal(err)
	}
	if res, _ := f.post(path, cookie, url.Values{csrfField: {csrf}, "grace": {"24h"}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("rotating a deleted webhook: %d, want 404", res.StatusCode)
	}
}

// An event's page links the todos its replays made, and its Replay confirmation
// says it was replayed before: replaying a payment twice by mistake is easy when
// nothing says so.
func TestEventPageShowsItsReplays(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	_, ev := f.webhookWithEvents(`{"payment":1}`)
	page := fmt.Sprintf("/events/%d", ev[0].EventID)
	if _, body := f.get(page, cookie); !strings.Contains(body, "<dt>Replayed</dt><dd><span class=\"muted\">never</span>") ||
		strings.Contains(body, "It was replayed before") {
		t.Fatal("an event never replayed does not say so")
	}
	var replays []store.Todo
	for range 2 {
		f.clock.Add(time.Minute)
		td, err := f.st.ReplayWebhookEvent(t.Context(), ev[0].EventID, 0, "human:1", nil)
		if err != nil {
			t.Fatal(err)
		}
		replays = append(replays, td)
	}
	_, body := f.get(page, cookie)
	for _, td := range replays {
		if !strings.Contains(body, fmt.Sprintf(`<a href="/todos/%d">#%d</a>`, td.ID, td.ID)) {
			t.Errorf("the event's page does not link replay todo %d", td.ID)
		}
	}
	if want := fmt.Sprintf("It was replayed before, 2 times: most recently as todo #%d, pending.", replays[1].ID); !strings.Contains(body, want) {
		t.Errorf("the Replay confirmation lacks %q", want)
	}
}

// A webhook's page answers under /webhooks/ too, as every other thing's page does
// under its list's name.
func TestWebhookPageUnderThePlural(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	res, _ := f.get("/webhooks/3", cookie)
	if res.StatusCode != http.StatusMovedPermanently || res.Header.Get("Location") != "/webhook/3" {
		t.Fatalf("/webhooks/3: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
}

// A replay takes the key and priority its webhook's rules give the delivery
// now, so that it waits behind its key's todo in flight, as a new delivery of
// the issue would: it made a todo without a key, and two workers could work
// one issue at once. It is neither filtered nor folded.
func TestReplayTakesItsWebhooksKey(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	h, ev := f.webhookWithEvents(`{"issue":{"number":7}}`)
	ctx := t.Context()
	if _, err := f.st.SetWebhookRules(ctx, h.ID, 0, []byte(`{"key": "issue#{/issue/number}", "priority": 3, "filter": {"events": ["push"]}}`), "test"); err != nil {
		t.Fatal(err)
	}
	inFlight, err := f.st.AddTodo(ctx, store.NewTodo{Queue: h.Queue, Payload: "{}", Options: store.TodoOptions{Key: "issue#7"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Claim(ctx, store.Ack{ID: inFlight.ID, Owner: "agent:a"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	res, _ := f.post(fmt.Sprintf("/events/%d/replay", ev[0].EventID), cookie, url.Values{csrfField: {csrf}})
	var todoID int64
	if _, err := fmt.Sscanf(res.Header.Get("Location"), "/todos/%d", &todoID); err != nil || res.StatusCode != http.StatusSeeOther {
		t.Fatalf("replay: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	td := f.todo(todoID)
	if td.Key != "issue#7" || !td.KeyWaiting || td.Priority != 3 || td.ID == inFlight.ID {
		t.Fatalf("replayed todo: key %q waiting %v priority %d; want issue#7 waiting behind todo %d, priority 3",
			td.Key, td.KeyWaiting, td.Priority, inFlight.ID)
	}
	// The delivery's own todo, from before the rules, is the only one claimable.
	for range 2 {
		if got, ok, err := f.st.ClaimNext(ctx, "agent:b", []string{h.Queue}, time.Minute); err != nil || (ok && got.ID != ev[0].TodoID) {
			t.Fatalf("a second worker claimed todo %d while the issue's todo is in flight (%v)", got.ID, err)
		}
	}
}
