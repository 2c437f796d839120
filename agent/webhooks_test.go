package agent

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/store"
)

const testBaseURL = "https://sb.example.net"

// hookEnv is an /mcp endpoint plus the webhook receiver on the same store, so the
// secrets agents are shown can be tried by a producer.
type hookEnv struct {
	*env
	ingest *httptest.Server
}

func newHookEnv(t *testing.T) *hookEnv {
	t.Helper()
	e := newEnv(t, func(c *envConfig) { c.agent.BaseURL = testBaseURL })
	router := httprouter.New()
	router.Handler(http.MethodPost, ingest.Route, ingest.NewReceiver(e.st, ingest.ReceiverOptions{Logger: e.quiet}))
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	return &hookEnv{env: e, ingest: srv}
}

// botEndpoint has queue inbox and a ceiling of two github/standard webhooks on
// inbox or ci.
func (h *hookEnv) botEndpoint(agentID string) (store.Endpoint, *agentClient) {
	h.t.Helper()
	ep, cred := h.endpoint(agentID, []string{"inbox"}, nil, func(s *store.EndpointSpec) {
		max, sources, queues := 2, []string{"github", "standard"}, []string{"inbox", "ci"}
		s.MaxWebhooks, s.WebhookSources, s.WebhookQueues = &max, &sources, &queues
	})
	return ep, h.dial(cred, false)
}

type createdHook struct {
	WebhookID     int64  `json:"webhook_id"`
	SourceType    string `json:"source_type"`
	Queue         string `json:"queue"`
	CreatedBy     string `json:"created_by"`
	IngestURL     string `json:"ingest_url"`
	SigningSecret string `json:"signing_secret"`
	Setup         string `json:"setup"`
	PreviousUntil string `json:"previous_secret_expires_at"`
}

// deliver plays the producer: signs body with secret and posts it to the hook's
// ingest URL, rewritten to the test receiver.
func (h *hookEnv) deliver(hook createdHook, secret, id string, body []byte) (int, map[string]any) {
	h.t.Helper()
	hdr, err := ingest.Sign(hook.SourceType, secret, id, body, h.clock.Now())
	if err != nil {
		h.t.Fatal(err)
	}
	if hook.SourceType == "github" {
		hdr.Set("X-GitHub-Event", "push")
	}
	u := h.ingest.URL + strings.TrimPrefix(hook.IngestURL, testBaseURL)
	req, _ := http.NewRequest(http.MethodPost, u, bytes.NewReader(body))
	req.Header = hdr
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// refusal calls a tool that must fail and returns its code and message.
func (ac *agentClient) refusal(t *testing.T, tool string, args map[string]any) errorPayload {
	t.Helper()
	res, err := ac.call(tool, args)
	if err != nil || !res.IsError {
		t.Fatalf("%s: %v %s, want a tool error", tool, err, text(res))
	}
	var p errorPayload
	if err := json.Unmarshal(res.RawStructuredContent, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCreateWebhookShowsTheSecretOnce(t *testing.T) {
	h := newHookEnv(t)
	_, bot := h.botEndpoint("bot")

	var gh, std createdHook
	bot.ok(t, VerbCreateWebhook, map[string]any{"source_type": "github", "queue": "inbox", "description": "repo"}, &gh)
	bot.ok(t, VerbCreateWebhook, map[string]any{"source_type": "standard", "queue": "ci"}, &std)
	if !strings.HasPrefix(gh.IngestURL, testBaseURL+"/webhooks/w/") || gh.SigningSecret == "" || gh.CreatedBy != "agent:bot" ||
		gh.Setup == "" {
		t.Fatalf("create github: %+v", gh)
	}
	// Standard Webhooks producers expect whsec_<base64>.
	key, ok := strings.CutPrefix(std.SigningSecret, "whsec_")
	if _, err := base64.StdEncoding.DecodeString(key); !ok || err != nil {
		t.Fatalf("standard secret %q is not whsec_<base64>", std.SigningSecret)
	}

	// After create, the secret is nowhere in what the agent can read.
	res, err := bot.call(VerbListWebhooks, nil)
	if err != nil || res.IsError {
		t.Fatalf("list_webhooks: %v %s", err, text(res))
	}
	var list struct {
		Webhooks []createdHook `json:"webhooks"`
	}
	if err := decodeResult(res, &list); err != nil || len(list.Webhooks) != 2 || list.Webhooks[0].WebhookID != std.WebhookID ||
		list.Webhooks[1].IngestURL != gh.IngestURL {
		t.Fatalf("list_webhooks: %+v, %v", list, err)
	}
	for _, s := range []string{gh.SigningSecret, std.SigningSecret, "signing_secret"} {
		if strings.Contains(string(res.RawStructuredContent), s) || strings.Contains(text(res), s) {
			t.Fatalf("list_webhooks shows %q", s)
		}
	}

	// The secret works for the producer, and the todo says who made the webhook.
	code, ans := h.deliver(gh, gh.SigningSecret, "d-1", []byte(`{"ref":"main"}`))
	if code != http.StatusAccepted {
		t.Fatalf("delivery: %d %v", code, ans)
	}
	td := h.todo(int64(ans["todo_id"].(float64)))
	if td.Queue != "inbox" || td.Trust != (store.Trust{Verified: true, Mode: "signed", WebhookCreatedBy: "agent:bot"}) ||
		td.Source.Type != "github" || td.Source.EventType != "push" {
		t.Fatalf("todo %+v", td)
	}
}

func TestWebhookCeiling(t *testing.T) {
	h := newHookEnv(t)
	ep, bot := h.botEndpoint("bot")
	cases := []struct {
		args        map[string]any
		code, limit string
	}{
		{map[string]any{"source_type": "slack", "queue": "inbox"}, CodeCeilingExceeded, `source type "slack" is not allowed (allowed: github, standard)`},
		{map[string]any{"source_type": "github", "queue": "payroll"}, CodeCeilingExceeded, `queue "payroll" is not allowed (allowed: inbox, ci)`},
		{map[string]any{"source_type": "myspace", "queue": "inbox"}, CodeInvalidArgument, "source_type must be one of github, stripe, slack, standard, gitlab, generic"},
		{map[string]any{"source_type": "github", "queue": "bad queue"}, CodeInvalidArgument, "not a valid queue"},
		{map[string]any{"source_type": "github", "queue": "inbox", "trust_mode": "none"}, CodeInvalidArgument, "trust_mode"},
	}
	for _, c := range cases {
		if p := bot.refusal(t, VerbCreateWebhook, c.args); p.Code != c.code || !strings.Contains(p.Message, c.limit) {
			t.Errorf("%v: %+v, want %s saying %q", c.args, p, c.code, c.limit)
		}
	}
	for i := 0; i < 2; i++ {
		bot.ok(t, VerbCreateWebhook, map[string]any{"source_type": "github", "queue": "inbox"}, nil)
	}
	p := bot.refusal(t, VerbCreateWebhook, map[string]any{"source_type": "github", "queue": "inbox"})
	if p.Code != CodeCeilingExceeded || !strings.Contains(p.Message, "at most 2 webhooks (2 exist)") {
		t.Fatalf("third webhook: %+v", p)
	}
	// The human raises the ceiling; the next call sees it without a reconnect.
	three := 3
	if _, err := h.st.UpdateEndpoint(context.Background(), ep.ID, store.EndpointSpec{MaxWebhooks: &three}, "human:test"); err != nil {
		t.Fatal(err)
	}
	bot.ok(t, VerbCreateWebhook, map[string]any{"source_type": "github", "queue": "inbox"}, nil)
}

func TestWebhooksAreTheirEndpointsOnly(t *testing.T) {
	h := newHookEnv(t)
	_, bot := h.botEndpoint("bot")
	_, other := h.botEndpoint("other")
	var hook createdHook
	bot.ok(t, VerbCreateWebhook, map[string]any{"source_type": "github", "queue": "inbox"}, &hook)
	_, ans := h.deliver(hook, hook.SigningSecret, "d-1", []byte(`{}`))
	eventID := ans["event_id"]
	human, err := h.st.CreateWebhook(context.Background(), store.NewWebhook{SourceType: "github", Queue: "inbox", Secret: "s", CreatedBy: "human:1"})
	if err != nil {
		t.Fatal(err)
	}

	var list struct {
		Webhooks []createdHook `json:"webhooks"`
	}
	other.ok(t, VerbListWebhooks, nil, &list)
	if len(list.Webhooks) != 0 {
		t.Fatalf("another endpoint lists %+v", list.Webhooks)
	}
	var events struct {
		Events []map[string]any `json:"events"`
	}
	other.ok(t, VerbListWebhookEvents, nil, &events)
	if len(events.Events) != 0 {
		t.Fatalf("another endpoint lists events %+v", events.Events)
	}
	for _, id := range []int64{hook.WebhookID, human.ID} {
		for _, call := range []struct {
			tool string
			args map[string]any
		}{
			{VerbRotateWebhook, map[string]any{"webhook_id": id}},
			{VerbDeleteWebhook, map[string]any{"webhook_id": id}},
			{VerbListWebhookEvents, map[string]any{"webhook_id": id}},
		} {
			if code := other.code(t, call.tool, call.args); code != CodeNotFound {
				t.Errorf("%s on webhook %d from another endpoint: %s", call.tool, id, code)
			}
		}
	}
	for _, tool := range []string{VerbGetWebhookEvent, VerbReplayWebhookEvent} {
		if code := other.code(t, tool, map[string]any{"event_id": eventID}); code != CodeNotFound {
			t.Errorf("%s from another endpoint: %s", tool, code)
		}
	}
	// Another endpoint's webhook and event read exactly as missing ones do.
	said := func(tool string, args map[string]any) string {
		res, err := other.call(tool, args)
		if err != nil || !res.IsError {
			t.Fatalf("%s %v: %v %v", tool, args, err, res)
		}
		return text(res)
	}
	const missing = 987654
	for _, c := range []struct{ tool, arg, what string }{
		{VerbRotateWebhook, "webhook_id", "webhook"}, {VerbGetWebhookEvent, "event_id", "webhook event"},
	} {
		theirs := map[string]int64{"webhook_id": hook.WebhookID, "event_id": int64(eventID.(float64))}[c.arg]
		got := strings.Replace(said(c.tool, map[string]any{c.arg: theirs}), strconv.FormatInt(theirs, 10), "N", 1)
		none := strings.Replace(said(c.tool, map[string]any{c.arg: missing}), strconv.FormatInt(missing, 10), "N", 1)
		if got != none || got != "not_found: "+c.what+" N" {
			t.Errorf("%s: another endpoint's is told %q, a missing one %q", c.tool, got, none)
		}
	}
	// Nothing changed: the secret still verifies and nothing was replayed. (A new
	// body: the same one would be a replay of the first, whatever its delivery id.)
	if code, _ := h.deliver(hook, hook.SigningSecret, "d-2", []byte(`{"n":2}`)); code != http.StatusAccepted {
		t.Fatalf("after the refusals the webhook answers %d", code)
	}
	if todos, _ := h.st.ListTodos(context.Background(), store.TodoFilter{}); len(todos) != 2 {
		t.Fatalf("%d todos", len(todos))
	}
}

func TestRotateWebhookOverlap(t *testing.T) {
	h := newHookEnv(t)
	_, bot := h.botEndpoint("bot")
	var hook, rotated createdHook
	bot.ok(t, VerbCreateWebhook, map[string]any{"source_type": "standard", "queue": "inbox"}, &hook)
	bot.ok(t, VerbRotateWebhook, map[string]any{"webhook_id": hook.WebhookID}, &rotated)
	if rotated.SigningSecret == "" || rotated.SigningSecret == hook.SigningSecret || rotated.PreviousUntil == "" ||
		rotated.IngestURL != hook.IngestURL {
		t.Fatalf("rotate: %+v", rotated)
	}
	body := []byte(`{"type":"ping"}`)
	for i, c := range []struct {
		secret string
		after  time.Duration
		want   int
	}{
		{rotated.SigningSecret, 0, http.StatusAccepted},
		{hook.SigningSecret, 0, http.StatusAccepted},                          // the producer is not updated yet
		{hook.SigningSecret, 24*time.Hour - time.Second, http.StatusAccepted}, // still within the day
		{hook.SigningSecret, 2 * time.Second, http.StatusUnauthorized},        // the grace is over
		{rotated.SigningSecret, 0, http.StatusAccepted},
	} {
		h.clock.Add(c.after)
		if code, ans := h.deliver(hook, c.secret, "m-"+string(rune('a'+i)), body); code != c.want {
			t.Fatalf("delivery %d: %d %v, want %d", i, code, ans, c.want)
		}
	}
	// grace_seconds 0 ends the old secret at once.
	var again createdHook
	bot.ok(t, VerbRotateWebhook, map[string]any{"webhook_id": hook.WebhookID, "grace_seconds": 0}, &again)
	if code, _ := h.deliver(hook, rotated.SigningSecret, "m-z", body); code != http.StatusUnauthorized {
		t.Fatalf("old secret after a rotation without grace: %d", code)
	}
	if p := bot.refusal(t, VerbRotateWebhook, map[string]any{"webhook_id": hook.WebhookID, "grace_seconds": 8 * 86400}); p.Code != CodeInvalidArgument {
		t.Fatalf("grace beyond a week: %+v", p)
	}
}

func TestWebhookEventsAndReplay(t *testing.T) {
	h := newHookEnv(t)
	ep, bot := h.botEndpoint("bot")
	var hook createdHook
	bot.ok(t, VerbCreateWebhook, map[string]any{"source_type": "github", "queue": "inbox"}, &hook)
	bodies := [][]byte{[]byte(`{"n":1}`), []byte(`{"n":2,"text":"héllo"}`), {0xff, 0xfe, 0x00, 'x'}}
	var eventIDs []float64
	for i, b := range bodies {
		code, ans := h.deliver(hook, hook.SigningSecret, "d-"+string(rune('a'+i)), b)
		if code != http.StatusAccepted {
			t.Fatalf("delivery %d: %d", i, code)
		}
		eventIDs = append(eventIDs, ans["event_id"].(float64))
	}

	res, err := bot.call(VerbListWebhookEvents, map[string]any{"webhook_id": hook.WebhookID, "limit": 2})
	if err != nil || res.IsError {
		t.Fatalf("list_webhook_events: %v %s", err, text(res))
	}
	var page struct {
		Events []struct {
			EventID     float64 `json:"event_id"`
			PayloadSize int     `json:"payload_size"`
			DeliveryID  string  `json:"delivery_id"`
		} `json:"events"`
		NextCursor string `json:"next_cursor"`
	}
	decodeResult(res, &page)
	if len(page.Events) != 2 || page.Events[0].EventID != eventIDs[2] || page.Events[0].PayloadSize != 4 || page.NextCursor == "" {
		t.Fatalf("first page: %+v", page)
	}
	if raw := string(res.RawStructuredContent); strings.Contains(raw, `"body"`) || strings.Contains(raw, "héllo") {
		t.Fatalf("a listing carries bodies: %s", raw)
	}
	cursor := page.NextCursor
	page.NextCursor = ""
	bot.ok(t, VerbListWebhookEvents, map[string]any{"cursor": cursor}, &page)
	if len(page.Events) != 1 || page.Events[0].EventID != eventIDs[0] || page.NextCursor != "" {
		t.Fatalf("second page: %+v", page)
	}

	var ev struct {
		Body         string            `json:"body"`
		BodyEncoding string            `json:"body_encoding"`
		Headers      map[string]string `json:"headers"`
		DeliveryID   string            `json:"delivery_id"`
	}
	bot.ok(t, VerbGetWebhookEvent, map[string]any{"event_id": eventIDs[1]}, &ev)
	if ev.Body != string(bodies[1]) || ev.BodyEncoding != "utf-8" || ev.Headers["X-GitHub-Event"] != "push" ||
		ev.Headers["X-Hub-Signature-256"] != "" || ev.DeliveryID != "d-b" {
		t.Fatalf("get_webhook_event: %+v", ev)
	}
	bot.ok(t, VerbGetWebhookEvent, map[string]any{"event_id": eventIDs[2]}, &ev)
	if raw, _ := base64.StdEncoding.DecodeString(ev.Body); ev.BodyEncoding != "base64" || !bytes.Equal(raw, bodies[2]) {
		t.Fatalf("binary body: %+v", ev)
	}

	var replay struct {
		Todo store.Todo `json:"todo"`
	}
	bot.ok(t, VerbReplayWebhookEvent, map[string]any{"event_id": eventIDs[0]}, &replay)
	td := h.todo(replay.Todo.ID)
	if td.Payload != `{"n":1}` || td.Source.Type != "replay" || td.Source.EventID != int64(eventIDs[0]) ||
		td.CreatedBy != "agent:bot" || !td.Trust.Verified || replay.Todo.Payload != "" {
		t.Fatalf("replayed todo %+v (result %+v)", td, replay.Todo)
	}
	audit, _ := h.st.ListAudit(context.Background(), store.AuditFilter{Action: "webhook_event.replay"})
	if len(audit) != 1 || audit[0].Actor != "agent:bot" {
		t.Fatalf("replay audit %+v", audit)
	}

	// Deleting the webhook stops its URL, keeps its history.
	bot.ok(t, VerbDeleteWebhook, map[string]any{"webhook_id": hook.WebhookID}, nil)
	if code, _ := h.deliver(hook, hook.SigningSecret, "d-late", []byte(`{}`)); code != http.StatusNotFound {
		t.Fatalf("delivery after delete: %d", code)
	}
	if code := bot.code(t, VerbDeleteWebhook, map[string]any{"webhook_id": hook.WebhookID}); code != CodeNotFound {
		t.Fatalf("second delete: %s", code)
	}
	bot.ok(t, VerbListWebhookEvents, map[string]any{"webhook_id": hook.WebhookID}, &page)
	if len(page.Events) != 3 {
		t.Fatalf("history after delete: %+v", page)
	}
	bot.ok(t, VerbReplayWebhookEvent, map[string]any{"event_id": eventIDs[1]}, nil)

	// Once the human takes the queue away, replays into it are refused.
	none := []string{}
	other := []string{"elsewhere"}
	if _, err := h.st.UpdateEndpoint(context.Background(), ep.ID, store.EndpointSpec{Queues: &other, WebhookQueues: &none}, "human:test"); err != nil {
		t.Fatal(err)
	}
	if code := bot.code(t, VerbReplayWebhookEvent, map[string]any{"event_id": eventIDs[1]}); code != CodeForbidden {
		t.Fatalf("replay into a queue taken away: %s", code)
	}
}

func TestWebhookVerbsNeedTheirGrant(t *testing.T) {
	h := newHookEnv(t)
	_, cred := h.endpoint("worker", []string{"inbox"}, store.TodoVerbs(), func(s *store.EndpointSpec) {
		max, sources, queues := 5, []string{"github"}, []string{"inbox"}
		s.MaxWebhooks, s.WebhookSources, s.WebhookQueues = &max, &sources, &queues
	})
	c := h.dial(cred, false)
	for _, verb := range store.WebhookVerbs() {
		res, err := c.call(verb, map[string]any{"source_type": "github", "queue": "inbox", "webhook_id": 1, "event_id": 1})
		if err == nil && !res.IsError {
			t.Errorf("%s succeeded without its grant: %s", verb, text(res))
		}
	}
	if hooks, _ := h.st.ListWebhooks(context.Background(), store.WebhookFilter{}); len(hooks) != 0 {
		t.Fatalf("a webhook was created: %+v", hooks)
	}
}

// Stripe and Slack mint their own secrets: an agent wiring a real account hands
// Switchboard the provider's secret. It is checked, verifies deliveries, and is
// never shown back.
func TestCreateWebhookImportsTheProducersSecret(t *testing.T) {
	h := newHookEnv(t)
	_, cred := h.endpoint("payments", []string{"payments"}, nil, func(s *store.EndpointSpec) {
		max, sources, queues := 2, []string{"stripe", "standard"}, []string{"payments"}
		s.MaxWebhooks, s.WebhookSources, s.WebhookQueues = &max, &sources, &queues
	})
	bot := h.dial(cred, false)
	const stripeSecret = "whsec_StripeMintedThisOne1234567890ab"

	// A secret the scheme cannot use is refused, without repeating it.
	for _, bad := range []map[string]any{
		{"source_type": "stripe", "queue": "payments", "signing_secret": "short"},
		{"source_type": "standard", "queue": "payments", "signing_secret": "whsec_not base64!"},
	} {
		p := bot.refusal(t, VerbCreateWebhook, bad)
		if p.Code != CodeInvalidArgument || strings.Contains(p.Message, bad["signing_secret"].(string)) {
			t.Fatalf("bad secret: %+v", p)
		}
	}

	var hook createdHook
	res, err := bot.call(VerbCreateWebhook, map[string]any{"source_type": "stripe", "queue": "payments", "signing_secret": stripeSecret})
	if err != nil || res.IsError {
		t.Fatalf("create with an imported secret: %v %s", err, text(res))
	}
	if err := decodeResult(res, &hook); err != nil {
		t.Fatal(err)
	}
	if hook.SigningSecret != "" || !strings.Contains(hook.Setup, "Stripe") ||
		strings.Contains(string(res.RawStructuredContent), stripeSecret) || strings.Contains(text(res), stripeSecret) {
		t.Fatalf("create with an imported secret echoed it or lost the hint: %+v", hook)
	}
	var imported struct {
		Imported bool `json:"secret_imported"`
	}
	if err := decodeResult(res, &imported); err != nil || !imported.Imported {
		t.Fatalf("secret_imported missing: %v", err)
	}
	if code, ans := h.deliver(hook, stripeSecret, "evt_1", []byte(`{"type":"charge.succeeded"}`)); code != http.StatusAccepted {
		t.Fatalf("delivery signed with the imported secret: %d %v", code, ans)
	}

	// A rotation to an unusable secret is refused without repeating it, and changes nothing.
	if p := bot.refusal(t, VerbRotateWebhook, map[string]any{"webhook_id": hook.WebhookID, "signing_secret": "bad secret"}); p.Code != CodeInvalidArgument || strings.Contains(p.Message, "bad secret") {
		t.Fatalf("rotate to a bad secret: %+v", p)
	}
	// Stripe rolled the secret: rotate installs the new one, the old one keeps its grace.
	const rolled = "whsec_RolledAtStripe0987654321zyxwvu"
	var rotated createdHook
	bot.ok(t, VerbRotateWebhook, map[string]any{"webhook_id": hook.WebhookID, "signing_secret": rolled}, &rotated)
	if rotated.SigningSecret != "" || rotated.PreviousUntil == "" {
		t.Fatalf("rotate with an imported secret: %+v", rotated)
	}
	for i, secret := range []string{rolled, stripeSecret} {
		// Bodies that differ: Stripe's id is the body's, and an id-less body signed
		// at the same t is one delivery, whichever secret signed it.
		if code, ans := h.deliver(hook, secret, "evt_r"+strconv.Itoa(i), []byte(`{"n":`+strconv.Itoa(i)+`}`)); code != http.StatusAccepted {
			t.Fatalf("delivery with secret %d after rotate: %d %v", i, code, ans)
		}
	}
}
