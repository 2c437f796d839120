package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/internal/httpbody"
	"github.com/switchboardhq/switchboard/internal/logevery"
	"github.com/switchboardhq/switchboard/store"
)

// The receiver is the one place a delivery enters Switchboard. Its order is the
// contract: the webhook by its URL token, a bounded read of the raw body (in bytes
// and in time), the signature over those raw bytes, then one transaction that
// stores the event and its todo. Nothing is persisted for a request that fails any
// step, and a 2xx is sent only once the delivery is on disk. It never logs the
// token, a secret, a signature or a body.

// Route is where the receiver is mounted (httprouter syntax).
const Route = "/webhooks/w/:token"

// URL is a webhook's ingest URL under the server's public base URL.
func URL(baseURL, token string) string {
	return strings.TrimRight(baseURL, "/") + "/webhooks/w/" + token
}

// CheckBaseURL reports whether base can begin ingest URLs that a producer can
// call: an absolute http or https URL with a host, and a path prefix at most (a
// query, fragment or user name would end up in the middle of every URL).
func CheckBaseURL(base string) error {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("base URL %q is not an absolute http(s) URL (say https://sb.example.net)", base)
	}
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("base URL %q must be scheme, host and at most a path (no query, fragment or user)", base)
	}
	return nil
}

// DefaultMaxBody bounds a delivery's body. GitHub caps payloads at 25 MB but sends
// far less for the events agents act on; a larger bound is a flag away.
const DefaultMaxBody = 1 << 20

// Outcomes passed to ReceiverOptions.Observe, one per request.
const (
	OutcomeAccepted       = "accepted"        // new event and todo committed
	OutcomeFiltered       = "filtered"        // new event committed; a webhook rule dropped it, no todo
	OutcomeDuplicate      = "duplicate"       // known delivery id or replay of a kept one; nothing new
	OutcomeChallenge      = "challenge"       // Slack url_verification answered
	OutcomeUnauthorized   = "unauthorized"    // signature missing, wrong, stale or malformed
	OutcomeRateLimited    = "rate_limited"    // failed verification past the webhook's failure budget
	OutcomeUnknownWebhook = "unknown_webhook" // no live webhook has that token
	OutcomeTooLarge       = "too_large"       // body over the bound
	OutcomeTimeout        = "timeout"         // the body did not arrive in time
	OutcomeBadRequest     = "bad_request"     // the body could not be read
	OutcomeUnusable       = "unusable"        // signed, but its delivery id or event type cannot be kept
	OutcomeError          = "error"           // our fault (database); the producer should retry
)

// ReceiverOptions configure NewReceiver. The zero value is usable.
type ReceiverOptions struct {
	// MaxBody bounds the raw body in bytes (default DefaultMaxBody).
	MaxBody int64
	// BodyTimeout bounds how long the whole body may take to arrive (default
	// httpbody.DefaultTimeout); a slower one gets 408 and stores nothing.
	BodyTimeout time.Duration
	// FailureRate and FailureBurst are the token bucket, per webhook, of requests
	// that fail verification and still get a 401; past it they get 429. Valid
	// deliveries never draw on it. Default 1 per second, burst 20.
	FailureRate  float64
	FailureBurst int
	// Now is the clock for signature timestamps and the limiter (default: the
	// store's clock).
	Now func() time.Time
	// Logger receives one line per request (default slog.Default()).
	Logger *slog.Logger
	// Observe, when set, is called once per request with the webhook's source type
	// ("" before the webhook is known) and the outcome; metrics attach here. It
	// must not block.
	Observe func(sourceType, outcome string)
}

// Receiver answers POST /webhooks/w/{token}.
type Receiver struct {
	store       *store.Store
	maxBody     int64
	bodyTimeout time.Duration
	now         func() time.Time
	log         *slog.Logger
	observe     func(sourceType, outcome string)
	failed      *failureLimiter

	hooks *hookCache
	rules ruleCache

	failMu   sync.Mutex
	failures map[int64]failureCount // refused deliveries per known webhook, since start

	// storeFailures throttles the log line of a delivery the store could not
	// record: on a full disk every delivery fails, thousands a second.
	storeFailures logevery.Counter[int64] // per webhook

	// unknowns throttles the log line of requests for no webhook: anyone can
	// send them, as fast as they like.
	unknowns logevery.Counter[struct{}]
}

// NewReceiver returns a receiver that records deliveries in st.
func NewReceiver(st *store.Store, opts ReceiverOptions) *Receiver {
	if opts.MaxBody <= 0 {
		opts.MaxBody = DefaultMaxBody
	}
	if opts.BodyTimeout <= 0 {
		opts.BodyTimeout = httpbody.DefaultTimeout
	}
	if opts.FailureRate <= 0 {
		opts.FailureRate = 1
	}
	if opts.FailureBurst <= 0 {
		opts.FailureBurst = 20
	}
	if opts.Now == nil {
		opts.Now = st.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Observe == nil {
		opts.Observe = func(string, string) {}
	}
	return &Receiver{
		store: st, maxBody: opts.MaxBody, bodyTimeout: opts.BodyTimeout, now: opts.Now, log: opts.Logger, observe: opts.Observe,
		hooks:         newHookCache(st, opts.Now),
		failed:        newFailureLimiter(opts.FailureRate, opts.FailureBurst, opts.Now),
		failures:      map[int64]failureCount{},
		storeFailures: logevery.Counter[int64]{Every: 10 * time.Second},
		unknowns:      logevery.Counter[struct{}]{Every: 10 * time.Second},
	}
}

// ServeHTTP handles one delivery. Mount it with httprouter at Route.
func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Unknown, deleted and malformed tokens get the same answer, and nothing of the
	// token is logged: it is the URL's only routing secret. The body of a request
	// for no webhook is never read (Guard: not by net/http either), so a stranger
	// can hold neither memory nor a connection with one.
	httpbody.Guard(w, r)
	token := httprouter.ParamsFromContext(r.Context()).ByName("token")
	if !plausibleToken(token) {
		rc.unknown(w, r)
		return
	}
	first, ok := rc.resolve(w, r, token, false)
	if !ok {
		return
	}
	body, status := httpbody.Read(w, r, rc.maxBody, rc.bodyTimeout)
	if status != 0 {
		outcome := OutcomeTooLarge
		switch status {
		case http.StatusRequestTimeout:
			outcome = OutcomeTimeout
		case http.StatusBadRequest:
			outcome = OutcomeBadRequest
		}
		rc.log.Warn("webhook delivery refused", "outcome", outcome, "webhook_id", first.hook.ID,
			"source", first.hook.SourceType, "max_body", rc.maxBody, "remote", r.RemoteAddr)
		rc.finish(w, first.hook.SourceType, outcome, status, errorBody(outcome))
		return
	}

	hook, d, res, ok := rc.record(w, r, token, first, body)
	if !ok {
		return
	}
	outcome, status := OutcomeAccepted, http.StatusAccepted
	answer := map[string]any{"event_id": res.EventID, "todo_id": res.TodoID}
	switch {
	case res.Duplicate:
		outcome, status = OutcomeDuplicate, http.StatusOK
		answer["duplicate"] = true
	case res.Filtered:
		outcome = OutcomeFiltered
		answer = map[string]any{"event_id": res.EventID, "filtered": true}
	case res.Folded:
		answer["coalesced"] = true
	}
	rc.finish(w, hook.SourceType, outcome, status, answer)
	// Sent before the log line is written: the producer is waiting for the answer,
	// not for the line.
	http.NewResponseController(w).Flush()
	rc.log.Info("webhook delivery "+outcome, "webhook_id", hook.ID, "source", hook.SourceType,
		"event_type", d.EventType, "delivery_id", d.ID, "event_id", res.EventID, "todo_id", res.TodoID,
		"queue", res.Queue, "secret", secretName(d.Secret), "size", len(body))
}

// resolved is what a token resolved to.
type resolved struct {
	hook    store.Webhook
	secrets []string
	cached  bool // from the hook cache, not the database
}

// resolve looks token up (fresh: in the database, not the cache). When ok is false
// it has already answered: unknown webhook, or our error.
func (rc *Receiver) resolve(w http.ResponseWriter, r *http.Request, token string, fresh bool) (res resolved, ok bool) {
	h, secrets, cached, err := rc.hooks.lookup(r.Context(), token, fresh)
	if errors.Is(err, store.ErrNotFound) {
		rc.unknown(w, r)
		return resolved{}, false
	}
	if err != nil {
		rc.log.Error("webhook delivery: look up webhook", "err", err)
		rc.finish(w, "", OutcomeError, http.StatusServiceUnavailable, errorBody(OutcomeError))
		return resolved{}, false
	}
	return resolved{hook: h, secrets: secrets, cached: cached}, true
}

// record verifies the signature and records the delivery, starting from first,
// what the token resolved to before the body was read. When ok is false it has
// already answered (unknown webhook, refused signature, Slack's challenge, or our
// error).
//
// The first try may use the cached webhook; a signature that fails against cached
// secrets, or a write that finds them rotated since, tries again against the
// database's secrets. The last try has no further one.
func (rc *Receiver) record(w http.ResponseWriter, r *http.Request, token string, first resolved, body []byte) (
	hook store.Webhook, d Delivery, res store.DeliveryResult, ok bool) {
	const tries = 3
	cur := first
	for try := 0; ; try++ {
		if try > 0 {
			var found bool
			if cur, found = rc.resolve(w, r, token, true); !found {
				return
			}
		}
		hook = cur.hook
		var err error
		d, err = Verify(hook.SourceType, cur.secrets, r.Header, body, rc.now())
		if errors.Is(err, ErrUnusable) {
			// Signed with this webhook's secret, so not a failed verification: a 400
			// that says what is wrong, outside the failure budget.
			rc.log.Warn("webhook delivery signed but not storable", "webhook_id", hook.ID, "source", hook.SourceType,
				"reason", err.Error(), "remote", r.RemoteAddr)
			rc.finish(w, hook.SourceType, OutcomeUnusable, http.StatusBadRequest,
				map[string]any{"error": OutcomeUnusable, "reason": err.Error()})
			return
		}
		if err != nil && cur.cached {
			continue
		}
		if err != nil {
			rc.refuse(w, r, hook, err)
			return
		}
		if d.Challenge != "" {
			// Slack's url_verification proves the URL, not an event: answer it, keep nothing.
			rc.log.Info("webhook url verification answered", "webhook_id", hook.ID, "source", hook.SourceType)
			rc.finish(w, hook.SourceType, OutcomeChallenge, http.StatusOK, map[string]any{"challenge": d.Challenge})
			return
		}
		decision := rc.rules.decide(rc.log, hook, d.EventType, body)
		res, err = rc.store.RecordDelivery(r.Context(), store.NewDelivery{
			WebhookID: hook.ID, DeliveryID: d.ID, ReplayKey: d.replayKeyBytes(), EventType: d.EventType, TrustMode: d.TrustMode,
			Headers: selectHeaders(r.Header), Body: body, VerifiedWith: hook.SecretsVersion(),
			RulesApplied: hook.RulesJSON(), Filtered: decision.Filtered, Options: decision.Options,
		})
		if errors.Is(err, store.ErrStale) && try+1 < tries {
			continue
		}
		if errors.Is(err, store.ErrNotFound) { // deleted since the lookup
			rc.hooks.forget(token)
			rc.unknown(w, r)
			return
		}
		if err != nil {
			if n := rc.storeFailures.Note(hook.ID, rc.now()); n > 0 {
				rc.log.Error("webhook delivery: record", "webhook_id", hook.ID, "source", hook.SourceType,
					"err", err, "failed", n)
			}
			// The producer keeps the delivery and sends it again: not at once, for
			// what fails a write (a full disk) rarely passes within a second.
			w.Header().Set("Retry-After", "30")
			rc.finish(w, hook.SourceType, OutcomeError, http.StatusServiceUnavailable,
				map[string]string{"error": OutcomeError, "message": "the delivery could not be stored; send it again later"})
			return
		}
		return hook, d, res, true
	}
}

// refuse answers a delivery whose signature did not verify: 401, or 429 past the
// webhook's failure budget.
func (rc *Receiver) refuse(w http.ResponseWriter, r *http.Request, hook store.Webhook, err error) {
	// The verifiers' errors name the scheme and the fault, never a secret or a
	// signature.
	rc.noteFailure(hook.ID, err.Error())
	if !rc.failed.allow(hook.ID) {
		w.Header().Set("Retry-After", "1")
		rc.finish(w, hook.SourceType, OutcomeRateLimited, http.StatusTooManyRequests, errorBody(OutcomeRateLimited))
		return
	}
	level := slog.LevelWarn
	if errors.Is(err, ErrNoSecret) {
		level = slog.LevelError // our configuration, not the sender
	}
	rc.log.Log(r.Context(), level, "webhook delivery not verified", "webhook_id", hook.ID,
		"source", hook.SourceType, "reason", err.Error(), "remote", r.RemoteAddr)
	rc.finish(w, hook.SourceType, OutcomeUnauthorized, http.StatusUnauthorized, errorBody(OutcomeUnauthorized))
}

func (rc *Receiver) unknown(w http.ResponseWriter, r *http.Request) {
	// One line, then at most one each 10 s with the count since: a stranger
	// sending thousands cannot flood the journal (or push real warnings out of
	// journald's rate limit).
	if n := rc.unknowns.Note(struct{}{}, rc.now()); n > 0 {
		rc.log.Info("webhook delivery for an unknown webhook", "remote", r.RemoteAddr, "requests", n)
	}
	rc.finish(w, "", OutcomeUnknownWebhook, http.StatusNotFound, errorBody(OutcomeUnknownWebhook))
}

func (rc *Receiver) finish(w http.ResponseWriter, source, outcome string, status int, body any) {
	rc.observe(source, outcome)
	b, _ := json.Marshal(body)
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

func errorBody(outcome string) map[string]string { return map[string]string{"error": outcome} }

// plausibleToken rejects, without a database read, what no minted token looks like.
func plausibleToken(t string) bool {
	if len(t) < 16 || len(t) > 128 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func secretName(i int) string {
	if i == 0 {
		return "current"
	}
	return "previous"
}

// keptHeaders are the request headers an event keeps: what says which delivery and
// event it was, never a signature or a token (X-Gitlab-Token is the secret itself).
var keptHeaders = []string{
	"Content-Type", "User-Agent",
	"X-GitHub-Event", "X-GitHub-Delivery", "X-GitHub-Hook-ID",
	"X-GitHub-Hook-Installation-Target-Type", "X-GitHub-Hook-Installation-Target-ID",
	"X-Gitlab-Event", "X-Gitlab-Event-UUID", "X-Gitlab-Instance", "X-Gitlab-Webhook-UUID", "Idempotency-Key",
	"Webhook-Id", "Webhook-Timestamp", "Svix-Id", "Svix-Timestamp",
	"X-Slack-Request-Timestamp", "X-Slack-Retry-Num", "X-Slack-Retry-Reason",
	"X-Delivery-Id", "X-Event-Type",
}

// maxHeaderValue bounds each kept header value.
const maxHeaderValue = 256

func selectHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for _, name := range keptHeaders {
		if v := h.Get(name); v != "" {
			if len(v) > maxHeaderValue {
				v = v[:maxHeaderValue]
			}
			out[name] = v
		}
	}
	return out
}

type failureCount struct {
	n      int64
	last   time.Time
	reason string
}

// noteFailure counts a delivery refused for a known webhook (bad, missing, stale
// or rate-limited signature) and keeps why. The map holds one entry per webhook
// that exists.
func (rc *Receiver) noteFailure(webhookID int64, reason string) {
	now := rc.now()
	rc.failMu.Lock()
	c := rc.failures[webhookID]
	c.n++
	c.last, c.reason = now, reason
	rc.failures[webhookID] = c
	rc.failMu.Unlock()
}

// Failures reports how many deliveries to a webhook were refused since this
// process started, when the last one was and why (a wrong secret, a clock that
// is off): what the board shows beside a webhook so a misconfigured producer is
// noticed and can be mended.
func (rc *Receiver) Failures(webhookID int64) (n int64, last time.Time, reason string) {
	rc.failMu.Lock()
	defer rc.failMu.Unlock()
	c := rc.failures[webhookID]
	return c.n, c.last, c.reason
}
