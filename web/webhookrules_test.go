package web

import (
	"encoding/json"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/store"
)

// rulesCLI is what `webhook update --rules` stores for a rules JSON: the form
// must store the same.
func rulesCLI(t *testing.T, text string) string {
	t.Helper()
	r, err := ingest.ParseRules([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// An operator sets a webhook's rules on its page, as update_webhook and the
// CLI set them: stored alike, applied to the next delivery, shown in words,
// audited; then removes them.
func TestWebhookRulesFromTheBoard(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	h, _ := f.webhookWithEvents()
	path := fmt.Sprintf("/webhook/%d", h.ID)
	_, page := f.get(path, cookie)
	if !strings.Contains(page, "none: every delivery makes a todo") || !strings.Contains(page, `action="/webhook/`+fmt.Sprint(h.ID)+`/rules"`) {
		t.Fatal("the webhook page does not show its rules and their form")
	}
	form := url.Values{"events": {"pull_request"}, "actions": {"opened, synchronize"},
		"match": {"/pull_request/draft = false\r\n/base/ref = main"}, "key": {"{/repository/full_name}#{/pull_request/number}"},
		"coalesce": {"1"}, "debounce": {"30s"}, "debounce_max": {"5m"}, "priority": {"5"}}
	if res, _ := f.post(path+"/rules", cookie, form); res.StatusCode != http.StatusForbidden {
		t.Fatalf("rules without the CSRF token: %d, want 403", res.StatusCode)
	}
	form.Set(csrfField, csrf)
	res, _ := f.post(path+"/rules", cookie, form)
	if page := f.follow(res, cookie); !strings.Contains(page, "Rules saved") ||
		!strings.Contains(page, "only where <span class=\"mono\">/base/ref = &#34;main&#34;</span>") ||
		!strings.Contains(page, "{/repository/full_name}#{/pull_request/number}</span>, coalesced, debounce 30s (at most 5m)") {
		t.Fatalf("the page after saving:\n%s", page)
	}
	if _, page := f.get("/webhooks", cookie); !strings.Contains(page, `href="/webhook/`+fmt.Sprint(h.ID)+`#rules"`) {
		t.Fatal("the webhook list does not say the webhook has rules")
	}
	got, err := f.st.Webhook(t.Context(), h.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := rulesCLI(t, `{"filter": {"events": ["pull_request"], "actions": ["opened", "synchronize"],
		"match": {"/pull_request/draft": false, "/base/ref": "main"}}, "key": "{/repository/full_name}#{/pull_request/number}",
		"coalesce": true, "debounce": "30s", "debounce_max": "5m", "priority": 5}`)
	if string(got.RulesJSON()) != want {
		t.Fatalf("stored rules\n%s\nwant, as the CLI stores them,\n%s", got.RulesJSON(), want)
	}
	rules, _ := ingest.ParseRules(got.RulesJSON())
	pr := `{"action": "opened", "pull_request": {"number": 42, "draft": false}, "base": {"ref": "main"}, "repository": {"full_name": "octo/repo"}}`
	if d := rules.Apply("pull_request", []byte(pr)); d.Filtered || d.Options.Key != "octo/repo#42" || !d.Options.Coalesce || d.Options.Priority != 5 {
		t.Fatalf("a matching delivery: %+v", d)
	}
	if d := rules.Apply("push", []byte(pr)); !d.Filtered {
		t.Fatal("a push passed a filter on pull_request")
	}
	audit := f.audited(fmt.Sprintf("webhook:%d", h.ID))
	if audit[0].Action != "webhook.update" || audit[0].Actor != store.OperatorActor(f.human.ID) {
		t.Fatalf("audit %+v", audit[0])
	}
	// The form shows the stored rules back, so that saving it again keeps them.
	_, page = f.get(path, cookie)
	for _, s := range []string{`name="events" value="pull_request"`, `name="key" value="{/repository/full_name}#{/pull_request/number}"`,
		`name="coalesce" value="1" checked`, `name="priority" value="5"`, "/base/ref = &#34;main&#34;\n/pull_request/draft = false</textarea>"} {
		if !strings.Contains(page, s) {
			t.Fatalf("the form does not show %s:\n%s", s, page)
		}
	}

	res, _ = f.post(path+"/rules", cookie, url.Values{csrfField: {csrf}, "remove": {"1"}, "key": {"{/x}"}})
	if page := f.follow(res, cookie); !strings.Contains(page, "Rules removed") || !strings.Contains(page, "none: every delivery makes a todo") {
		t.Fatal("the page after removing the rules")
	}
	if got, _ := f.st.Webhook(t.Context(), h.ID); len(got.RulesJSON()) != 0 {
		t.Fatalf("rules after removing them: %s", got.RulesJSON())
	}
	if n := len(f.audited(fmt.Sprintf("webhook:%d", h.ID))); n != len(audit)+1 {
		t.Fatalf("removing the rules wrote %d audit rows, want 1", n-len(audit))
	}
}

// A mistake in the rules form is said, the form comes back as typed, and
// nothing changes: not the rules, not the audit log.
func TestWebhookRulesFormBadInput(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	h, _ := f.webhookWithEvents()
	path := fmt.Sprintf("/webhook/%d", h.ID)
	f.post(path+"/rules", cookie, url.Values{csrfField: {csrf}, "actions": {"opened"}})
	before, _ := f.st.Webhook(t.Context(), h.ID)
	audited := len(f.audited(fmt.Sprintf("webhook:%d", h.ID)))
	for _, c := range []struct {
		field, value, says string
	}{
		{"key", "octo/repo", "has no {/json/pointer}"},
		{"key", "{/a", "a { without its }"},
		{"match", "pull_request/draft = false", "does not parse: it does not start with /"},
		{"match", "/pull_request/draft", "Match line 1: write /json/pointer = value"},
		{"debounce", "soon", "debounce &#34;soon&#34;: a duration"},
		{"priority", "high", "is not a whole number"},
		{"priority", "5000", "priority"},
		{"coalesce", "1", "coalesce needs a key template"},
	} {
		res, body := f.post(path+"/rules", cookie, url.Values{csrfField: {csrf}, c.field: {c.value}, "events": {"push"}})
		if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, c.says) {
			t.Errorf("%s %q: %d, want 400 saying %q", c.field, c.value, res.StatusCode, c.says)
			continue
		}
		if !strings.Contains(body, `id="webhook-rules" open`) || !strings.Contains(body, `name="events" value="push"`) {
			t.Errorf("%s %q: the form did not come back open, as typed", c.field, c.value)
		}
		// The facts still say what is stored, not what was typed.
		if !strings.Contains(body, `only actions <span class="mono">opened</span>`) {
			t.Errorf("%s %q: the page does not show the stored rules", c.field, c.value)
		}
	}
	after, _ := f.st.Webhook(t.Context(), h.ID)
	if string(after.RulesJSON()) != string(before.RulesJSON()) {
		t.Fatalf("refused forms changed the rules: %s, was %s", after.RulesJSON(), before.RulesJSON())
	}
	if n := len(f.audited(fmt.Sprintf("webhook:%d", h.ID))); n != audited {
		t.Fatalf("refused forms wrote %d audit rows", n-audited)
	}
	if err := f.st.DeleteWebhook(t.Context(), h.ID, 0, "test"); err != nil {
		t.Fatal(err)
	}
	if res, _ := f.post(path+"/rules", cookie, url.Values{csrfField: {csrf}, "actions": {"closed"}}); res.StatusCode != http.StatusNotFound {
		t.Fatalf("rules of a deleted webhook: %d, want 404", res.StatusCode)
	}
}

// An event a rule filtered says so in the webhook's event list, rather than
// that its todo was pruned.
func TestFilteredEventSaysSo(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	h, _ := f.webhookWithEvents()
	res, err := f.st.RecordDelivery(t.Context(), store.NewDelivery{WebhookID: h.ID, DeliveryID: "d-f", EventType: "push",
		TrustMode: "signed", Body: []byte(`{}`), Filtered: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, page := f.get(fmt.Sprintf("/webhook/%d", h.ID), cookie); !strings.Contains(page, "filtered by rule") || strings.Contains(page, ">pruned<") {
		t.Fatal("a filtered event does not say so in the webhook's list")
	}
	if _, page := f.get(fmt.Sprintf("/events/%d", res.EventID), cookie); !strings.Contains(page, "a rule of the webhook filtered it") {
		t.Fatal("a filtered event's page does not say so")
	}
	// A replay, an operator's word, makes the todo the rule did not.
	rp, err := f.st.ReplayWebhookEvent(t.Context(), res.EventID, 0, "test", nil)
	if err != nil || rp.Source.EventID != res.EventID {
		t.Fatalf("replay of a filtered event: %+v, %v", rp, err)
	}
}

// The same pointer on two match lines is refused, not half-kept: the rules
// compare a pointer with one value, and the form would silently drop a line.
func TestWebhookRulesFormOnePointerOnce(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	h, _ := f.webhookWithEvents()
	path := fmt.Sprintf("/webhook/%d", h.ID)
	res, body := f.post(path+"/rules", cookie, url.Values{csrfField: {csrf},
		"match": {"/base/ref = main\n/action = opened\n/base/ref = develop"}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, "Match line 3: /base/ref is on line 1 already") {
		t.Fatalf("one pointer on two lines: %d", res.StatusCode)
	}
	if got, _ := f.st.Webhook(t.Context(), h.ID); len(got.RulesJSON()) != 0 {
		t.Fatalf("a refused form set rules: %s", got.RulesJSON())
	}
}

// Rules an agent set, shown in the form and saved back unchanged, stay the
// same rules: a pointer may hold "=" (a label such as env=prod) and a value
// " = "; the form writes "pointer = value", and reads it back so.
func TestWebhookRulesFormKeepsWhatItShows(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	h, _ := f.webhookWithEvents()
	stored := rulesCLI(t, `{"filter": {"match": {"/labels/env=prod": true, "/title": "a = b", "/ref": "refs/heads/main"}}, "priority": 2}`)
	if _, err := f.st.SetWebhookRules(t.Context(), h.ID, 0, []byte(stored), "agent:triage"); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/webhook/%d", h.ID)
	_, page := f.get(path, cookie)
	m := regexp.MustCompile(`(?s)<textarea name="match"[^>]*>(.*?)</textarea>`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no match field on the page")
	}
	res, _ := f.post(path+"/rules", cookie, url.Values{csrfField: {csrf}, "match": {html.UnescapeString(m[1])}, "priority": {"2"}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("saving the rules as shown: %d", res.StatusCode)
	}
	if got, _ := f.st.Webhook(t.Context(), h.ID); string(got.RulesJSON()) != stored {
		t.Fatalf("saved as shown, the rules became\n%s\nwere\n%s", got.RulesJSON(), stored)
	}
}

// GitLab's event types hold spaces (Merge Request Hook): the form's lists are
// split at commas, so such a filter can be set on the board, and one an agent
// set is kept when the form is saved back.
func TestWebhookRulesFormEventsWithSpaces(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	h, _ := f.webhookWithEvents()
	path := fmt.Sprintf("/webhook/%d", h.ID)
	res, _ := f.post(path+"/rules", cookie, url.Values{csrfField: {csrf}, "events": {"Merge Request Hook, Push Hook"}})
	want := rulesCLI(t, `{"filter": {"events": ["Merge Request Hook", "Push Hook"]}}`)
	if got, _ := f.st.Webhook(t.Context(), h.ID); res.StatusCode != http.StatusSeeOther || string(got.RulesJSON()) != want {
		t.Fatalf("GitLab event types from the form: %d, stored %s, want %s", res.StatusCode, got.RulesJSON(), want)
	}
	_, page := f.get(path, cookie)
	m := regexp.MustCompile(`name="events" value="([^"]*)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatal("no events field on the page")
	}
	f.post(path+"/rules", cookie, url.Values{csrfField: {csrf}, "events": {html.UnescapeString(m[1])}})
	if got, _ := f.st.Webhook(t.Context(), h.ID); string(got.RulesJSON()) != want {
		t.Fatalf("saved back as shown, the rules became %s, want %s", got.RulesJSON(), want)
	}
}
