package ingest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/internal/testkit/teststore"
	"github.com/switchboardhq/switchboard/store"
)

// rig is a receiver over httptest on a real SQLite file.
type rig struct {
	t       *testing.T
	store   *store.Store
	path    string // the database file
	clock   *testkit.Clock
	srv     *httptest.Server
	rc      *Receiver
	logs    *testkit.LockedBuffer
	rung    chan store.TodoChange
	mu      sync.Mutex
	outcome map[string]int
}

func newRig(t *testing.T, opts ReceiverOptions) *rig {
	t.Helper()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	path := testkit.DB(t)
	st := teststore.OpenPath(t, path, store.Options{Now: clock.Now})
	r := &rig{t: t, store: st, path: path, clock: clock, logs: &testkit.LockedBuffer{}, rung: make(chan store.TodoChange, 64), outcome: map[string]int{}}
	st.OnTodoChange(func(c store.TodoChange) {
		if c.Claimable {
			r.rung <- c
		}
	})
	opts.Logger = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts.Observe = func(_, outcome string) { r.mu.Lock(); r.outcome[outcome]++; r.mu.Unlock() }
	router := httprouter.New()
	r.rc = NewReceiver(st, opts)
	router.Handler(http.MethodPost, Route, r.rc)
	r.srv = httptest.NewServer(router)
	t.Cleanup(r.srv.Close)
	return r
}

func (r *rig) webhook(source, queue string) (store.Webhook, string) {
	r.t.Helper()
	secret, err := NewSecret(source)
	if err != nil {
		r.t.Fatal(err)
	}
	h, err := r.store.CreateWebhook(context.Background(), store.NewWebhook{SourceType: source, Queue: queue,
		Secret: secret, CreatedBy: "human:1"})
	if err != nil {
		r.t.Fatal(err)
	}
	return h, secret
}

type reply struct {
	status int
	body   map[string]any
}

func (r *rig) post(token string, h http.Header, body []byte) reply {
	r.t.Helper()
	req, err := http.NewRequest(http.MethodPost, URL(r.srv.URL, token), bytes.NewReader(body))
	if err != nil {
		r.t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	return r.do(req)
}

func (r *rig) do(req *http.Request) reply {
	r.t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	out := reply{status: resp.StatusCode}
	raw, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(raw, &out.body); err != nil {
		r.t.Fatalf("status %d, body %q is not JSON", resp.StatusCode, raw)
	}
	return out
}

func (r *rig) signed(source, secret, id string, body []byte) http.Header {
	r.t.Helper()
	h, err := Sign(source, secret, id, body, r.clock.Now())
	if err != nil {
		r.t.Fatal(err)
	}
	return h
}

func (r *rig) count(what string) int {
	r.t.Helper()
	switch what {
	case "events":
		ev, err := r.store.ListWebhookEvents(context.Background(), store.EventFilter{Limit: 500})
		if err != nil {
			r.t.Fatal(err)
		}
		return len(ev)
	case "todos":
		td, err := r.store.ListTodos(context.Background(), store.TodoFilter{Limit: 1000})
		if err != nil {
			r.t.Fatal(err)
		}
		return len(td)
	}
	r.t.Fatalf("count %q", what)
	return 0
}

func id(v any) int64 { f, _ := v.(float64); return int64(f) }

func TestReceiverAcceptsEverySource(t *testing.T) {
	cases := []struct {
		source, id, eventType, mode string
		body                        string
		extra                       http.Header
	}{
		{"github", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "pull_request", TrustSigned, `{"action":"opened"}`,
			http.Header{"X-Github-Event": {"pull_request"}}},
		{"stripe", "evt_1NG8Du2eZvKYlo2CUI79vXWy", "invoice.paid", TrustSigned, `{"id":"evt_1NG8Du2eZvKYlo2CUI79vXWy","object":"event","type":"invoice.paid"}`, nil},
		{"slack", "Ev08MFMKH6", "app_mention", TrustSigned, `{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention"}}`, nil},
		{"standard", "msg_2KWPBgLlAfxdpx2AI54pPJ85f4W", "user.created", TrustSigned, `{"type":"user.created","data":{}}`, nil},
		{"gitlab", "b5a2e7c0-4f4b-4f4b-9a1e-000000000001", "Push Hook", TrustToken, `{"object_kind":"push"}`,
			http.Header{"X-Gitlab-Event": {"Push Hook"}}},
		{"generic", "delivery-42", "thing.happened", TrustSigned, `{"n":42}`, http.Header{"X-Event-Type": {"thing.happened"}}},
	}
	r := newRig(t, ReceiverOptions{})
	for _, c := range cases {
		t.Run(c.source, func(t *testing.T) {
			hook, secret := r.webhook(c.source, "q-"+c.source)
			h := r.signed(c.source, secret, c.id, []byte(c.body))
			for k, v := range c.extra {
				h[k] = v
			}
			first := r.post(hook.Token, h, []byte(c.body))
			if first.status != http.StatusAccepted {
				t.Fatalf("status %d %v", first.status, first.body)
			}
			// The doorbell rang before the answer: the hook fires after the commit,
			// before the write returns.
			select {
			case c := <-r.rung:
				if c.ID != id(first.body["todo_id"]) {
					t.Fatalf("rang for todo %d, answered %v", c.ID, first.body["todo_id"])
				}
			default:
				t.Fatal("answered 202 before the doorbell rang")
			}
			todo, err := r.store.Todo(context.Background(), id(first.body["todo_id"]))
			if err != nil {
				t.Fatal(err)
			}
			wantSrc := store.Source{Type: c.source, WebhookID: hook.ID, EventID: id(first.body["event_id"]), EventType: c.eventType}
			wantTrust := store.Trust{Verified: true, Mode: c.mode, WebhookCreatedBy: "human:1"}
			if todo.Payload != c.body || todo.Queue != "q-"+c.source || todo.Source != wantSrc || todo.Trust != wantTrust {
				t.Fatalf("todo %+v\nwant source %+v trust %+v", todo, wantSrc, wantTrust)
			}
			ev, err := r.store.WebhookEvent(context.Background(), id(first.body["event_id"]))
			if err != nil || ev.DeliveryID != c.id || string(ev.Body) != c.body {
				t.Fatalf("event %+v, %v", ev, err)
			}
			for k, v := range ev.Headers {
				if strings.Contains(strings.ToLower(k), "signature") || strings.Contains(v, secret) {
					t.Fatalf("event kept header %s", k)
				}
			}

			// The producer retries the same delivery: same ids, nothing new, no ring.
			again := r.post(hook.Token, r.signed(c.source, secret, c.id, []byte(c.body)), []byte(c.body))
			if again.status != http.StatusOK || again.body["duplicate"] != true ||
				id(again.body["event_id"]) != id(first.body["event_id"]) || id(again.body["todo_id"]) != id(first.body["todo_id"]) {
				t.Fatalf("redelivery: %d %v, first %v", again.status, again.body, first.body)
			}
			select {
			case c := <-r.rung:
				t.Fatalf("redelivery rang for %+v", c)
			default:
			}
		})
	}
	if n := r.count("todos"); n != len(cases) {
		t.Fatalf("%d todos, want one per source (%d)", n, len(cases))
	}
}

func TestReceiverRefusesBadSignaturesAndPersistsNothing(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	hook, secret := r.webhook("github", "inbox")
	body := []byte(`{"action":"opened"}`)
	good := r.signed("github", secret, "d-1", body)
	wrong := r.signed("github", "not-the-secret", "d-1", body)
	stripeHeaders, _ := Sign("stripe", secret, "", body, r.clock.Now())
	cases := []struct {
		name string
		h    http.Header
		body []byte
	}{
		{"wrong secret", wrong, body},
		{"no signature", http.Header{"X-Github-Delivery": {"d-1"}}, body},
		{"tampered body", good, []byte(`{"action":"closed"}`)},
		{"truncated signature", http.Header{"X-Hub-Signature-256": {good.Get("X-Hub-Signature-256")[:20]}}, body},
		{"another scheme's headers", stripeHeaders, body},
	}
	for _, c := range cases {
		got := r.post(hook.Token, c.h, c.body)
		if got.status != http.StatusUnauthorized || got.body["error"] != OutcomeUnauthorized {
			t.Errorf("%s: %d %v, want 401", c.name, got.status, got.body)
		}
	}
	if e, td := r.count("events"), r.count("todos"); e != 0 || td != 0 {
		t.Fatalf("refused deliveries left %d events and %d todos", e, td)
	}
	if r.outcome[OutcomeUnauthorized] != len(cases) {
		t.Fatalf("observed %v", r.outcome)
	}
}

func TestReceiverBodyBound(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	hook, secret := r.webhook("generic", "inbox")
	atLimit := bytes.Repeat([]byte("a"), DefaultMaxBody)
	over := bytes.Repeat([]byte("a"), DefaultMaxBody+1)

	if got := r.post(hook.Token, r.signed("generic", secret, "at", atLimit), atLimit); got.status != http.StatusAccepted {
		t.Fatalf("exactly 1 MiB: %d %v", got.status, got.body)
	}
	// Over the bound with a Content-Length, and streamed without one (chunked): both
	// are refused, even correctly signed.
	if got := r.post(hook.Token, r.signed("generic", secret, "over", over), over); got.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("1 MiB + 1 with Content-Length: %d %v", got.status, got.body)
	}
	req, _ := http.NewRequest(http.MethodPost, URL(r.srv.URL, hook.Token), io.MultiReader(bytes.NewReader(over)))
	req.ContentLength = -1
	req.Header = r.signed("generic", secret, "over-chunked", over)
	if got := r.do(req); got.status != http.StatusRequestEntityTooLarge {
		t.Fatalf("1 MiB + 1 chunked: %d %v", got.status, got.body)
	}
	if e, td := r.count("events"), r.count("todos"); e != 1 || td != 1 {
		t.Fatalf("%d events, %d todos; want only the 1 MiB one", e, td)
	}
}

// answerLimit bounds the wait for an answer the tests expect at once or soon after
// a short body deadline. It is far longer than any of those, so only a broken
// build reaches it, and far shorter than the default body deadline, so an answer
// that waited for a body that never comes misses it.
const answerLimit = 10 * time.Second

// A request for no webhook is answered before a byte of its body is read: a
// stranger who declares a large body and stalls holds neither the buffer nor the
// connection, and the answer is the same 404 whatever the token.
func TestReceiverUnknownWebhookBodyNeverRead(t *testing.T) {
	r := newRig(t, ReceiverOptions{}) // the default body deadline, 30 s
	hook, secret := r.webhook("github", "inbox")
	if err := r.store.DeleteWebhook(context.Background(), hook.ID, 0, "human:1"); err != nil {
		t.Fatal(err)
	}
	h := r.signed("github", secret, "d", []byte(`{}`))
	h.Set("Content-Type", "application/json")
	for name, token := range map[string]string{
		"deleted":   hook.Token,
		"unknown":   strings.Repeat("A", len(hook.Token)),
		"malformed": "not%20a%20token",
	} {
		// Past net/http's own drain limit (256 KiB) and under it: neither waits.
		for _, declared := range []int64{DefaultMaxBody, 100} {
			resp, body, closed := testkit.StalledPost(t, URL(r.srv.URL, token), h, declared, []byte("{"), answerLimit)
			if resp.StatusCode != http.StatusNotFound || strings.TrimSpace(string(body)) != `{"error":"unknown_webhook"}` {
				t.Errorf("%s, %d bytes declared: %d %s", name, declared, resp.StatusCode, body)
			}
			if !closed {
				t.Errorf("%s, %d bytes declared: the connection stayed open", name, declared)
			}
		}
	}
	if r.outcome[OutcomeUnknownWebhook] != 6 {
		t.Fatalf("observed %v", r.outcome)
	}
}

// A body that does not arrive within the deadline is answered 408, its
// connection closed, and nothing is stored.
func TestReceiverBodyDeadline(t *testing.T) {
	r := newRig(t, ReceiverOptions{BodyTimeout: 200 * time.Millisecond})
	hook, secret := r.webhook("github", "inbox")
	body := []byte(`{"action":"opened"}`)
	h := r.signed("github", secret, "slow-1", body)
	h.Set("Content-Type", "application/json")
	resp, answer, closed := testkit.StalledPost(t, URL(r.srv.URL, hook.Token), h, int64(len(body)), body[:1], answerLimit)
	if resp.StatusCode != http.StatusRequestTimeout || strings.TrimSpace(string(answer)) != `{"error":"timeout"}` {
		t.Fatalf("stalled body: %d %s", resp.StatusCode, answer)
	}
	if !closed {
		t.Fatal("the connection of a stalled body stayed open")
	}
	if e, td := r.count("events"), r.count("todos"); e != 0 || td != 0 {
		t.Fatalf("a stalled body left %d events, %d todos", e, td)
	}
	if r.outcome[OutcomeTimeout] != 1 {
		t.Fatalf("observed %v", r.outcome)
	}
}

// slowReader hands out its bytes a piece at a time, pausing before each.
type slowReader struct {
	b     []byte
	piece int
	pause time.Duration
}

func (s *slowReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	time.Sleep(s.pause)
	n := copy(p[:min(len(p), s.piece)], s.b)
	s.b = s.b[n:]
	return n, nil
}

// A body that arrives slowly but within the deadline, larger than what a declared
// length reserves up front, is recorded whole; the connection stays open for the
// producer's next delivery.
func TestReceiverSlowBodyWithinDeadline(t *testing.T) {
	r := newRig(t, ReceiverOptions{BodyTimeout: 20 * time.Second})
	hook, secret := r.webhook("generic", "inbox")
	body := []byte(`{"pad":"` + strings.Repeat("x", 200<<10) + `"}`)
	req, err := http.NewRequest(http.MethodPost, URL(r.srv.URL, hook.Token),
		&slowReader{b: body, piece: 50 << 10, pause: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	req.ContentLength = int64(len(body))
	req.Header = r.signed("generic", secret, "slow-ok", body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted || resp.Close {
		t.Fatalf("slow delivery: %d, close %v", resp.StatusCode, resp.Close)
	}
	ev, err := r.store.ListWebhookEvents(context.Background(), store.EventFilter{Limit: 10})
	if err != nil || len(ev) != 1 {
		t.Fatalf("events %d, %v", len(ev), err)
	}
	full, err := r.store.WebhookEvent(context.Background(), ev[0].ID)
	if err != nil || !bytes.Equal(full.Body, body) {
		t.Fatalf("stored body of %d bytes, sent %d; %v", len(full.Body), len(body), err)
	}
}

func TestReceiverUnknownWebhooksLookAlike(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	hook, secret := r.webhook("github", "inbox")
	body := []byte(`{}`)
	if err := r.store.DeleteWebhook(context.Background(), hook.ID, 0, "human:1"); err != nil {
		t.Fatal(err)
	}
	for name, token := range map[string]string{
		"deleted":   hook.Token,
		"unknown":   strings.Repeat("A", len(hook.Token)),
		"malformed": "not a token",
		"short":     "abc",
	} {
		got := r.post(strings.ReplaceAll(token, " ", "%20"), r.signed("github", secret, "d", body), body)
		if got.status != http.StatusNotFound || len(got.body) != 1 || got.body["error"] != OutcomeUnknownWebhook {
			t.Errorf("%s: %d %v", name, got.status, got.body)
		}
	}
	if e, td := r.count("events"), r.count("todos"); e != 0 || td != 0 {
		t.Fatalf("%d events, %d todos", e, td)
	}
}

// Anyone can send requests for no webhook, as fast as they like: the log hears of
// them once, then once each 10 s with their count, not once a request.
func TestReceiverUnknownWebhooksLogRationed(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	lines := func() int { return strings.Count(r.logs.String(), "unknown webhook") }
	for range 50 {
		r.post("no-such-token", nil, []byte(`{}`))
	}
	if n := lines(); n != 1 {
		t.Fatalf("50 requests for no webhook logged %d lines, want 1", n)
	}
	r.clock.Add(10 * time.Second)
	r.post("no-such-token", nil, []byte(`{}`))
	if n := lines(); n != 2 || !strings.Contains(r.logs.String(), "requests=50") {
		t.Fatalf("10 s later: %d lines, want 2, the second counting 50:\n%s", n, r.logs.String())
	}
}

func TestReceiverSlackURLVerification(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	hook, secret := r.webhook("slack", "inbox")
	body := []byte(`{"token":"legacy","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`)
	got := r.post(hook.Token, r.signed("slack", secret, "", body), body)
	if got.status != http.StatusOK || got.body["challenge"] != "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P" {
		t.Fatalf("challenge: %d %v", got.status, got.body)
	}
	// The challenge is answered only to Slack: unsigned, it is an ordinary 401.
	if got := r.post(hook.Token, nil, body); got.status != http.StatusUnauthorized || got.body["challenge"] != nil {
		t.Fatalf("unsigned challenge: %d %v", got.status, got.body)
	}
	if e, td := r.count("events"), r.count("todos"); e != 0 || td != 0 {
		t.Fatalf("the handshake left %d events, %d todos", e, td)
	}
}

func TestReceiverRotationOverlap(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	hook, old := r.webhook("standard", "inbox")
	fresh, _ := NewSecret("standard")
	if _, err := r.store.RotateWebhook(context.Background(), hook.ID, 0, fresh, 24*time.Hour, "human:1"); err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"ping"}`)
	send := func(secret, msgID string) int {
		return r.post(hook.Token, r.signed("standard", secret, msgID, body), body).status
	}
	if s := send(fresh, "m1"); s != http.StatusAccepted {
		t.Fatalf("new secret: %d", s)
	}
	if s := send(old, "m2"); s != http.StatusAccepted {
		t.Fatalf("old secret within the grace period: %d", s)
	}
	r.clock.Add(24*time.Hour + time.Second)
	if s := send(old, "m3"); s != http.StatusUnauthorized {
		t.Fatalf("old secret after the grace period: %d", s)
	}
	if s := send(fresh, "m4"); s != http.StatusAccepted {
		t.Fatalf("new secret after the grace period: %d", s)
	}
	if !strings.Contains(r.logs.String(), "secret=previous") {
		t.Fatal("a delivery under the previous secret is not logged as such")
	}
}

// The receiver keeps webhooks it has resolved in memory; a change made by another
// process on the same file (the CLI while serve runs) must still take effect on the
// very next delivery, with nothing recorded for a delivery it refuses.
func TestReceiverCacheNeverOutlivesAChange(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	hook, old := r.webhook("standard", "inbox")
	other := teststore.OpenPath(t, r.path, store.Options{Now: r.clock.Now})
	ctx := context.Background()
	body := []byte(`{"type":"ping"}`)
	send := func(secret, msgID string) int {
		t.Helper()
		return r.post(hook.Token, r.signed("standard", secret, msgID, body), body).status
	}
	// rotateElsewhere rotates through the other handle, with no grace.
	rotateElsewhere := func() string {
		t.Helper()
		secret, _ := NewSecret("standard")
		if _, err := other.RotateWebhook(ctx, hook.ID, 0, secret, 0, "human:1"); err != nil {
			t.Fatal(err)
		}
		return secret
	}
	if s := send(old, "m1"); s != http.StatusAccepted {
		t.Fatalf("first delivery: %d", s)
	}

	// Rotated elsewhere: the cached secret no longer signs.
	fresh := rotateElsewhere()
	if s := send(old, "m2"); s != http.StatusUnauthorized {
		t.Fatalf("old secret after a rotation elsewhere: %d", s)
	}
	if s := send(fresh, "m3"); s != http.StatusAccepted {
		t.Fatalf("new secret after a rotation elsewhere: %d", s)
	}
	// And again, now that the cache holds the new secret.
	newer := rotateElsewhere()
	if s := send(newer, "m4"); s != http.StatusAccepted {
		t.Fatalf("second rotation's secret: %d", s)
	}
	if s := send(fresh, "m5"); s != http.StatusUnauthorized {
		t.Fatalf("first rotation's secret after the second: %d", s)
	}

	// Deleted elsewhere: unknown, whether the signature is good or not.
	if err := other.DeleteWebhook(ctx, hook.ID, 0, "human:1"); err != nil {
		t.Fatal(err)
	}
	if s := send(newer, "m6"); s != http.StatusNotFound {
		t.Fatalf("good signature for a webhook deleted elsewhere: %d", s)
	}
	if s := send(old, "m7"); s != http.StatusNotFound {
		t.Fatalf("bad signature for a webhook deleted elsewhere: %d", s)
	}
	if e, td := r.count("events"), r.count("todos"); e != 3 || td != 3 {
		t.Fatalf("%d events, %d todos; want the 3 accepted deliveries only", e, td)
	}
}

func TestReceiverRateLimitsOnlyFailures(t *testing.T) {
	r := newRig(t, ReceiverOptions{FailureRate: 1, FailureBurst: 3})
	hook, secret := r.webhook("github", "inbox")
	other, _ := r.webhook("github", "inbox")
	body := []byte(`{"zen":"x"}`)
	forged := r.signed("github", "forged", "f", body)

	for i := 0; i < 3; i++ {
		if got := r.post(hook.Token, forged, body); got.status != http.StatusUnauthorized {
			t.Fatalf("forgery %d within the burst: %d", i, got.status)
		}
	}
	for i := 0; i < 5; i++ {
		if got := r.post(hook.Token, forged, body); got.status != http.StatusTooManyRequests {
			t.Fatalf("forgery past the burst: %d", got.status)
		}
	}
	// The bucket is empty, and valid deliveries still pass, every one of them.
	for i := 0; i < 10; i++ {
		valid := []byte(fmt.Sprintf(`{"zen":"x","n":%d}`, i))
		got := r.post(hook.Token, r.signed("github", secret, "ok-"+string(rune('a'+i)), valid), valid)
		if got.status != http.StatusAccepted {
			t.Fatalf("valid delivery %d while flooded: %d %v", i, got.status, got.body)
		}
	}
	// Another webhook has its own bucket.
	if got := r.post(other.Token, forged, body); got.status != http.StatusUnauthorized {
		t.Fatalf("other webhook: %d", got.status)
	}
	// The bucket refills with time.
	r.clock.Add(time.Second)
	if got := r.post(hook.Token, forged, body); got.status != http.StatusUnauthorized {
		t.Fatalf("after a second: %d", got.status)
	}
	if got := r.post(hook.Token, forged, body); got.status != http.StatusTooManyRequests {
		t.Fatalf("and again: %d", got.status)
	}
	if e, td := r.count("events"), r.count("todos"); e != 10 || td != 10 {
		t.Fatalf("%d events, %d todos; want the 10 valid ones", e, td)
	}
	if r.outcome[OutcomeRateLimited] != 6 || r.outcome[OutcomeAccepted] != 10 {
		t.Fatalf("observed %v", r.outcome)
	}
}

// Every path through the receiver, then a search of everything it logged for the
// token, the secret, the signature and the body.
func TestReceiverNeverLogsSecrets(t *testing.T) {
	r := newRig(t, ReceiverOptions{MaxBody: 4096})
	hook, secret := r.webhook("github", "inbox")
	slackHook, slackSecret := r.webhook("slack", "inbox")
	gitlabHook, gitlabSecret := r.webhook("gitlab", "inbox")
	body := []byte(`{"marker":"BODY-MARKER-7f3a"}`)
	good := r.signed("github", secret, "d-1", body)
	forged := r.signed("github", "forged-secret", "d-2", body)
	challenge := []byte(`{"type":"url_verification","challenge":"CHALLENGE-MARKER-91b2"}`)
	gitlab := r.signed("gitlab", gitlabSecret, "g-1", body)

	r.post(hook.Token, good, body)                                                    // accepted
	r.post(hook.Token, good, body)                                                    // duplicate
	r.post(hook.Token, forged, body)                                                  // unauthorized
	r.post(hook.Token, r.signed("github", secret, "d-3", []byte("x")), body)          // tampered
	r.post(hook.Token, good, bytes.Repeat(body, 200))                                 // too large
	r.post(slackHook.Token, r.signed("slack", slackSecret, "", challenge), challenge) // challenge
	r.post(gitlabHook.Token, gitlab, body)                                            // token scheme
	r.post(gitlabHook.Token, http.Header{"X-Gitlab-Token": {gitlabSecret + "x"}}, body)
	r.post(strings.Repeat("B", len(hook.Token)), good, body) // unknown
	if err := r.store.DeleteWebhook(context.Background(), hook.ID, 0, "human:1"); err != nil {
		t.Fatal(err)
	}
	r.post(hook.Token, good, body) // deleted

	logs := r.logs.String()
	if !strings.Contains(logs, "webhook delivery accepted") || !strings.Contains(logs, "not verified") {
		t.Fatalf("the paths did not all run:\n%s", logs)
	}
	for what, s := range map[string]string{
		"token": hook.Token, "slack token": slackHook.Token, "gitlab token": gitlabHook.Token,
		"secret": secret, "slack secret": slackSecret, "gitlab secret": gitlabSecret,
		"signature":        strings.TrimPrefix(good.Get("X-Hub-Signature-256"), "sha256="),
		"forged signature": strings.TrimPrefix(forged.Get("X-Hub-Signature-256"), "sha256="),
		"body":             "BODY-MARKER-7f3a", "challenge": "CHALLENGE-MARKER-91b2",
	} {
		if strings.Contains(logs, s) {
			t.Errorf("the log contains the %s", what)
		}
	}
}

func TestReceiverCountsRefusedDeliveriesPerWebhook(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	hook, secret := r.webhook("github", "inbox")
	other, _ := r.webhook("github", "inbox")
	if n, _, _ := r.rc.Failures(hook.ID); n != 0 {
		t.Fatalf("fresh webhook has %d failures", n)
	}
	for i := 0; i < 3; i++ {
		h := http.Header{"X-Hub-Signature-256": {"sha256=" + strings.Repeat("0", 64)}}
		if got := r.post(hook.Token, h, []byte(`{"zen":"x"}`)); got.status != http.StatusUnauthorized {
			t.Fatalf("bad signature answered %d", got.status)
		}
	}
	good := []byte(`{"zen":"y"}`)
	if got := r.post(hook.Token, r.signed("github", secret, "d-1", good), good); got.status != http.StatusAccepted {
		t.Fatalf("good delivery answered %d", got.status)
	}
	n, last, reason := r.rc.Failures(hook.ID)
	if n != 3 || !last.Equal(r.clock.Now()) || !strings.Contains(reason, "signature") {
		t.Fatalf("Failures = %d at %v (%q); want 3 at %v, for the signature", n, last, reason, r.clock.Now())
	}
	if n, _, _ := r.rc.Failures(other.ID); n != 0 {
		t.Fatalf("another webhook has %d failures", n)
	}
}

// A delivery signed with the webhook's secret but carrying a delivery id that cannot
// be kept is a 400 that says so, stores nothing, and does not spend the failure
// budget meant for forgeries: the sender proved the secret.
func TestReceiverSignedButUnusableIsABadRequest(t *testing.T) {
	r := newRig(t, ReceiverOptions{FailureRate: 1, FailureBurst: 1})
	hook, secret := r.webhook("github", "inbox")
	body := []byte(`{"zen":"x"}`)
	long := strings.Repeat("d", maxField+1)
	for i := 0; i < 3; i++ {
		got := r.post(hook.Token, r.signed("github", secret, long, body), body)
		if got.status != http.StatusBadRequest || got.body["error"] != OutcomeUnusable ||
			!strings.Contains(fmt.Sprint(got.body["reason"]), "delivery id of 257 bytes") {
			t.Fatalf("signed, over-long id (try %d): %d %v", i, got.status, got.body)
		}
	}
	if e, td := r.count("events"), r.count("todos"); e != 0 || td != 0 {
		t.Fatalf("%d events, %d todos stored for an unusable delivery", e, td)
	}
	// The budget of one forgery is still there.
	forged := r.signed("github", "forged", "f", body)
	if got := r.post(hook.Token, forged, body); got.status != http.StatusUnauthorized {
		t.Fatalf("first forgery after the unusable ones: %d, want 401 (budget untouched)", got.status)
	}
	if got := r.post(hook.Token, r.signed("github", secret, "fine", body), body); got.status != http.StatusAccepted {
		t.Fatalf("a valid delivery: %d %v", got.status, got.body)
	}
	if r.outcome[OutcomeUnusable] != 3 || r.outcome[OutcomeUnauthorized] != 1 {
		t.Fatalf("observed %v", r.outcome)
	}
}

// An empty body is still a delivery (the board's TestCSRF is what catches a stalled-
// body guard that cancels bodiless requests; the store finishes a write anyway).
func TestReceiverAcceptsAnEmptyBody(t *testing.T) {
	r := newRig(t, ReceiverOptions{})
	hook, secret := r.webhook("github", "inbox")
	got := r.post(hook.Token, r.signed("github", secret, "empty-1", nil), nil)
	if got.status != http.StatusAccepted {
		t.Fatalf("signed empty delivery: %d %v", got.status, got.body)
	}
	if e, td := r.count("events"), r.count("todos"); e != 1 || td != 1 {
		t.Fatalf("%d events, %d todos for the empty delivery", e, td)
	}
}
