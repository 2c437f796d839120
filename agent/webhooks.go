package agent

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/store"
)

// The webhook verbs let an agent stand up its own ingestion within the ceiling its
// human set (max count, source types, queues). Switchboard mints and holds every
// secret and shows it once, at create and rotate; an agent can change neither a
// webhook's source type nor its trust, and sees only its own endpoint's webhooks
// and their events: anything else is not_found, as if it did not exist.

// Rotation grace: how long the old secret still verifies after rotate_webhook.
const (
	defaultGraceSeconds = 24 * 60 * 60
	maxGraceSeconds     = 7 * 24 * 60 * 60
)

// webhookTools is the table of webhook and event-history verbs.
func (a *Agent) webhookTools() []Tool {
	return []Tool{
		{Name: VerbCreateWebhook, Verb: VerbCreateWebhook, Define: defineCreateWebhook, Handle: a.createWebhook},
		{Name: VerbListWebhooks, Verb: VerbListWebhooks, Define: defineListWebhooks, Handle: a.listWebhooks},
		{Name: VerbRotateWebhook, Verb: VerbRotateWebhook, Define: defineRotateWebhook, Handle: a.rotateWebhook},
		{Name: VerbDeleteWebhook, Verb: VerbDeleteWebhook, Define: defineDeleteWebhook, Handle: a.deleteWebhook},
		{Name: VerbListWebhookEvents, Verb: VerbListWebhookEvents, Define: defineListWebhookEvents, Handle: a.listWebhookEvents},
		{Name: VerbGetWebhookEvent, Verb: VerbGetWebhookEvent, Define: defineGetWebhookEvent, Handle: a.getWebhookEvent},
		{Name: VerbReplayWebhookEvent, Verb: VerbReplayWebhookEvent, Define: defineReplayWebhookEvent, Handle: a.replayWebhookEvent},
		{Name: VerbUpdateWebhook, Verb: VerbUpdateWebhook, Define: defineUpdateWebhook, Handle: a.updateWebhook},
	}
}

// Results.

// webhookRow is a webhook as agents see it: never a secret.
type webhookRow struct {
	store.Webhook
	IngestURL string `json:"ingest_url" jsonschema:"where the producer posts its deliveries"`
}

// secretResult is create_webhook's and rotate_webhook's answer: the only two
// places a secret is ever shown.
type secretResult struct {
	webhookRow
	SigningSecret string `json:"signing_secret,omitempty" jsonschema:"the secret the producer signs with, shown only here: minted secrets only"`
	Imported      bool   `json:"secret_imported,omitempty" jsonschema:"true when the producer's own secret was given and kept"`
	Setup         string `json:"setup" jsonschema:"where the ingest URL and the secret go at the producer"`
}

type webhooksResult struct {
	Webhooks []webhookRow `json:"webhooks"`
}

type deletedResult struct {
	WebhookID int64 `json:"webhook_id"`
	Deleted   bool  `json:"deleted"`
}

type eventsResult struct {
	Events     []store.WebhookEvent `json:"events" jsonschema:"verified deliveries, newest first, without headers or body"`
	NextCursor string               `json:"next_cursor,omitempty" jsonschema:"pass it back as cursor for the next page; absent on the last page"`
}

// eventResult carries the body as text when it is UTF-8 (almost always: JSON or a
// form), else as base64, so it arrives byte for byte.
type eventResult struct {
	store.WebhookEvent
	Headers      map[string]string `json:"headers" jsonschema:"the delivery's non-secret headers that were kept"`
	Body         string            `json:"body" jsonschema:"the body as it arrived: the text itself, or base64 when body_encoding says so"`
	BodyEncoding string            `json:"body_encoding" jsonschema:"utf-8, or base64 for a body that is not UTF-8 text"`
}

func (a *Agent) row(h store.Webhook) webhookRow {
	return webhookRow{Webhook: h, IngestURL: ingest.URL(a.opts.BaseURL, h.Token)}
}

// setupHints say where the URL and secret go, per source type. Stripe and Slack
// mint their own secrets and take none from outside: for a real account the caller
// passes the provider's secret as signing_secret instead (see importedHints).
var setupHints = map[string]string{
	"github":   "Repository or organisation Settings → Webhooks → Add webhook: Payload URL = ingest_url, content type application/json, Secret = signing_secret.",
	"gitlab":   "Project Settings → Webhooks: URL = ingest_url, Secret token = signing_secret (GitLab sends it back as X-Gitlab-Token).",
	"standard": "Give the producer (Standard Webhooks, Svix) ingest_url and signing_secret in its whsec_ form.",
	"generic":  "The producer signs each body: X-Signature-256: sha256=<hex HMAC-SHA256 of the raw body keyed with signing_secret>; a body is accepted once (X-Delivery-Id is not signed), so each body must differ, say by an id in it.",
	"stripe":   "Stripe signs with a secret it mints itself and takes none from outside: this webhook verifies deliveries signed with signing_secret (Stripe-Signature t=…,v1=…), as test tools do. For a real Stripe account, add ingest_url as an endpoint in Stripe, then rotate_webhook with Stripe's whsec_… as signing_secret.",
	"slack":    "Slack signs with the app's own Signing Secret and takes none from outside: this webhook verifies requests signed with signing_secret (X-Slack-Signature v0=…); url_verification is answered for you. For a real Slack app, pass its Signing Secret as signing_secret.",
}

// importedHints replace setupHints when the caller brought the secret: it is not
// shown back, so the hint says only where the URL goes.
var importedHints = map[string]string{
	"stripe": "Verifying with the Stripe secret you gave. In Stripe: Developers → Webhooks → the endpoint whose URL is ingest_url.",
	"slack":  "Verifying with the Slack Signing Secret you gave. In the Slack app: Event Subscriptions → Request URL = ingest_url (url_verification is answered for you).",
}

// signingSecretArg is create_webhook's and rotate_webhook's optional import of a
// secret the producer minted.
func signingSecretArg() mcp.ToolOption {
	return mcp.WithString("signing_secret", mcp.MinLength(8), mcp.MaxLength(512),
		mcp.Description("The producer's own signing secret, when it mints one and accepts none from outside "+
			"(Stripe's whsec_…, a Slack app's Signing Secret). It is checked, stored sealed and never shown back. "+
			"Omit it and Switchboard mints one."))
}

// secretFor returns the secret a create or rotate stores: the caller's, checked,
// or a fresh one. imported says which.
func secretFor(sourceType string, given *string) (secret string, imported bool, err error) {
	secret, _, err = ingest.SecretFor(sourceType, given)
	if err != nil && given != nil {
		return "", false, errorf(CodeInvalidArgument, "signing_secret: %v", err)
	}
	return secret, given != nil, err
}

// secretAnswer is the create/rotate answer: a minted secret is shown this once, an
// imported one never.
func (a *Agent) secretAnswer(h store.Webhook, secret string, imported bool) secretResult {
	if !imported {
		return secretResult{webhookRow: a.row(h), SigningSecret: secret, Setup: setupHints[h.SourceType]}
	}
	hint, ok := importedHints[h.SourceType]
	if !ok {
		hint = "Verifying with the secret you gave; configure the producer with ingest_url."
	}
	return secretResult{webhookRow: a.row(h), Imported: true, Setup: hint}
}

func webhookIDArg() mcp.ToolOption {
	return mcp.WithInteger("webhook_id", mcp.Required(), mcp.Min(1), mcp.Description("The webhook's id."))
}

func eventIDArg() mcp.ToolOption {
	return mcp.WithInteger("event_id", mcp.Required(), mcp.Min(1), mcp.Description("The event's id."))
}

func defineCreateWebhook(ep store.Endpoint) mcp.Tool {
	sources := ep.Ceiling.Sources
	queues := ep.Ceiling.Queues
	srcOpts := []mcp.PropertyOption{mcp.Required(), mcp.Description("The producer's signature scheme.")}
	if len(sources) > 0 {
		srcOpts = append(srcOpts, mcp.Enum(sources...))
	}
	qOpts := []mcp.PropertyOption{mcp.Required(), mcp.Description("The queue its deliveries become todos on.")}
	if len(queues) > 0 {
		qOpts = append(qOpts, mcp.Enum(queues...))
	}
	return mcp.NewTool(VerbCreateWebhook,
		mcp.WithDescription(fmt.Sprintf("Create a webhook: an ingest URL whose verified deliveries become todos on a "+
			"queue. Switchboard mints the signing secret and returns it ONCE, here; configure the producer with "+
			"ingest_url and signing_secret. For a producer that mints its own secret (Stripe, Slack), pass that "+
			"as signing_secret instead. Your ceiling: at most %d webhooks, source types %s, queues %s; past it "+
			"the call answers ceiling_exceeded.", ep.Ceiling.MaxWebhooks, listOrNone(sources), listOrNone(queues))),
		mcp.WithString("source_type", srcOpts...),
		mcp.WithString("queue", qOpts...),
		mcp.WithString("description", mcp.MaxLength(1024), mcp.Description("What the webhook is for.")),
		signingSecretArg(),
		rulesArg(),
		closed,
		// Open world: the URL it returns is meant for a producer outside Switchboard.
		returns[secretResult](),
		annotate("Create a webhook", false, false, false, true),
	)
}

func defineListWebhooks(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbListWebhooks,
		mcp.WithDescription("List this endpoint's webhooks with their ingest URLs, newest first. Secrets are never "+
			"shown again; rotate_webhook mints a new one."),
		closed,
		returns[webhooksResult](),
		annotate("List webhooks", true, false, true, false),
	)
}

func defineRotateWebhook(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbRotateWebhook,
		mcp.WithDescription(fmt.Sprintf("Replace a webhook's signing secret. The new one is returned ONCE; the old "+
			"one still verifies for grace_seconds (default %d, 24 h) so the producer can be updated without dropping "+
			"deliveries. A rotation during a grace period ends the older secret at once. Pass signing_secret to "+
			"install a secret the producer rolled itself (Stripe) instead of minting one.", defaultGraceSeconds)),
		webhookIDArg(),
		signingSecretArg(),
		mcp.WithInteger("grace_seconds", mcp.Min(0), mcp.Max(maxGraceSeconds), mcp.DefaultNumber(defaultGraceSeconds),
			mcp.Description(fmt.Sprintf("How long the old secret still verifies, 0 to %d seconds.", maxGraceSeconds))),
		closed,
		// Destructive: after the grace period the old secret is gone.
		returns[secretResult](),
		annotate("Rotate a webhook's secret", false, true, false, false),
	)
}

func defineDeleteWebhook(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbDeleteWebhook,
		mcp.WithDescription("Delete a webhook: its URL answers 404 from now on and its secret is erased. Its event "+
			"history stays readable and replayable; the todos it made are untouched."),
		webhookIDArg(), closed,
		returns[deletedResult](),
		annotate("Delete a webhook", false, true, true, false),
	)
}

func defineListWebhookEvents(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbListWebhookEvents,
		mcp.WithDescription(fmt.Sprintf("List verified deliveries to this endpoint's webhooks, newest first, as "+
			"compact rows: payload_size instead of the body (get_webhook_event reads one). Up to %d rows per page "+
			"(default %d); pass next_cursor back as cursor.", maxPageLimit, defaultPageLimit)),
		mcp.WithInteger("webhook_id", mcp.Min(1), mcp.Description("Only this webhook's events.")),
		limitArg(), cursorArg(),
		closed,
		returns[eventsResult](),
		annotate("List webhook events", true, false, true, false),
	)
}

func defineGetWebhookEvent(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbGetWebhookEvent,
		mcp.WithDescription("Read one delivery as it arrived: the raw body (utf-8 text, or base64 when it is not "+
			"text; see body_encoding) and the headers that identify it (never signatures or tokens)."),
		eventIDArg(), closed,
		returns[eventResult](),
		annotate("Read a webhook event", true, false, true, false),
	)
}

func defineReplayWebhookEvent(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbReplayWebhookEvent,
		mcp.WithDescription("Put a new todo on the webhook's queue from a stored delivery: the same body and trust, "+
			"source type replay (the event id says which), with the key and priority the webhook's rules give it now "+
			"(neither filtered nor folded: it waits behind its key's todo in flight). The replay is audited. Returns the compact todo."),
		eventIDArg(), closed,
		returns[ackResult](),
		annotate("Replay a webhook event", false, false, false, false),
	)
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

// positiveID checks a required id argument.
func positiveID(name string, p *int64) (int64, error) {
	if p == nil {
		return 0, errorf(CodeInvalidArgument, "%s is required", name)
	}
	if *p < 1 {
		return 0, errorf(CodeInvalidArgument, "%s must be a positive whole number", name)
	}
	return *p, nil
}

// ownWebhook loads a live webhook of the caller's endpoint. Another endpoint's,
// a human's and a deleted one are all not_found.
func (a *Agent) ownWebhook(ctx context.Context, ep store.Endpoint, id int64) (store.Webhook, error) {
	h, err := a.st.Webhook(ctx, id)
	if err != nil {
		return store.Webhook{}, err
	}
	if h.EndpointID != ep.ID || h.DeletedAt != nil {
		return store.Webhook{}, errorf(CodeNotFound, "webhook %d", id)
	}
	return h, nil
}

// ownEvent loads the event a call names by its event_id argument, when it is an
// event of one of the caller's endpoint's webhooks.
func (a *Agent) ownEvent(ctx context.Context, c *Call) (store.WebhookEvent, error) {
	var in struct {
		EventID *int64 `json:"event_id"`
	}
	if err := c.Decode(&in); err != nil {
		return store.WebhookEvent{}, err
	}
	id, err := positiveID("event_id", in.EventID)
	if err != nil {
		return store.WebhookEvent{}, err
	}
	e, err := a.st.WebhookEvent(ctx, id)
	if err != nil {
		return store.WebhookEvent{}, err
	}
	if e.EndpointID != c.Endpoint.ID {
		return store.WebhookEvent{}, errorf(CodeNotFound, "webhook event %d", id)
	}
	return e, nil
}

func (a *Agent) createWebhook(ctx context.Context, c *Call) (any, error) {
	var in struct {
		SourceType  string          `json:"source_type"`
		Queue       string          `json:"queue"`
		Description string          `json:"description"`
		Secret      *string         `json:"signing_secret"`
		Rules       json.RawMessage `json:"rules"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	rules, err := checkRules(in.Rules)
	if err != nil {
		return nil, err
	}
	// Asked before a secret is minted for it; toolError words the refusal.
	if err := store.CheckSourceTypes(in.SourceType); err != nil {
		return nil, err
	}
	if !store.ValidQueueName(in.Queue) {
		return nil, errorf(CodeInvalidArgument, "queue %q is not a valid queue name", in.Queue)
	}
	secret, imported, err := secretFor(in.SourceType, in.Secret)
	if err != nil {
		return nil, err
	}
	// The store checks the ceiling inside the insert's transaction, from the
	// endpoint row as it is now.
	h, err := a.st.CreateWebhook(ctx, store.NewWebhook{SourceType: in.SourceType, Queue: in.Queue,
		Description: in.Description, Secret: secret, CreatedBy: c.Actor, EndpointID: c.Endpoint.ID, CheckCeiling: true,
		Rules: rules})
	var ce *store.CeilingError
	if errors.As(err, &ce) {
		return nil, errorf(CodeCeilingExceeded, "this endpoint's webhook ceiling refuses it: %s", ce.Limit)
	}
	if err != nil {
		return nil, err
	}
	return a.secretAnswer(h, secret, imported), nil
}

func (a *Agent) listWebhooks(ctx context.Context, c *Call) (any, error) {
	if err := c.Decode(&struct{}{}); err != nil {
		return nil, err
	}
	list, err := a.st.ListWebhooks(ctx, store.WebhookFilter{EndpointID: c.Endpoint.ID})
	if err != nil {
		return nil, err
	}
	out := webhooksResult{Webhooks: make([]webhookRow, 0, len(list))}
	for _, h := range list {
		out.Webhooks = append(out.Webhooks, a.row(h))
	}
	return out, nil
}

func (a *Agent) rotateWebhook(ctx context.Context, c *Call) (any, error) {
	var in struct {
		WebhookID *int64  `json:"webhook_id"`
		Grace     *int64  `json:"grace_seconds"`
		Secret    *string `json:"signing_secret"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	id, err := positiveID("webhook_id", in.WebhookID)
	if err != nil {
		return nil, err
	}
	grace := int64(defaultGraceSeconds)
	if in.Grace != nil {
		if *in.Grace < 0 || *in.Grace > maxGraceSeconds {
			return nil, errorf(CodeInvalidArgument, "grace_seconds must be 0 to %d", maxGraceSeconds)
		}
		grace = *in.Grace
	}
	h, err := a.ownWebhook(ctx, c.Endpoint, id)
	if err != nil {
		return nil, err
	}
	secret, imported, err := secretFor(h.SourceType, in.Secret)
	if err != nil {
		return nil, err
	}
	// Scoped again in the store, so a webhook moved or deleted meanwhile is not_found.
	if h, err = a.st.RotateWebhook(ctx, id, c.Endpoint.ID, secret, time.Duration(grace)*time.Second, c.Actor); err != nil {
		return nil, err
	}
	return a.secretAnswer(h, secret, imported), nil
}

func (a *Agent) deleteWebhook(ctx context.Context, c *Call) (any, error) {
	var in struct {
		WebhookID *int64 `json:"webhook_id"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	id, err := positiveID("webhook_id", in.WebhookID)
	if err != nil {
		return nil, err
	}
	if err := a.st.DeleteWebhook(ctx, id, c.Endpoint.ID, c.Actor); err != nil {
		return nil, err
	}
	return deletedResult{WebhookID: id, Deleted: true}, nil
}

func (a *Agent) listWebhookEvents(ctx context.Context, c *Call) (any, error) {
	var in struct {
		WebhookID *int64 `json:"webhook_id"`
		Limit     *int64 `json:"limit"`
		Cursor    string `json:"cursor"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	f := store.EventFilter{EndpointID: c.Endpoint.ID}
	if in.WebhookID != nil {
		id, err := positiveID("webhook_id", in.WebhookID)
		if err != nil {
			return nil, err
		}
		// History outlives deletion: a deleted webhook of this endpoint still lists.
		h, err := a.st.Webhook(ctx, id)
		if err != nil {
			return nil, err
		}
		if h.EndpointID != c.Endpoint.ID {
			return nil, errorf(CodeNotFound, "webhook %d", id)
		}
		f.WebhookID = id
	}
	limit, before, err := pageArgs(in.Limit, in.Cursor)
	if err != nil {
		return nil, err
	}
	// One more than a page says whether there is a next one.
	f.Limit, f.Before = limit+1, before
	rows, err := a.st.ListWebhookEvents(ctx, f)
	if err != nil {
		return nil, err
	}
	rows, older := store.PageOf(rows, limit)
	return eventsResult{Events: rows, NextCursor: nextCursor(older)}, nil
}

func (a *Agent) getWebhookEvent(ctx context.Context, c *Call) (any, error) {
	e, err := a.ownEvent(ctx, c)
	if err != nil {
		return nil, err
	}
	out := eventResult{WebhookEvent: e, Headers: e.Headers}
	out.Body, out.BodyEncoding = JSONText(string(e.Body))
	if out.Headers == nil {
		out.Headers = map[string]string{}
	}
	return out, nil
}

func (a *Agent) replayWebhookEvent(ctx context.Context, c *Call) (any, error) {
	e, err := a.ownEvent(ctx, c)
	if err != nil {
		return nil, err
	}
	// The todo goes to the webhook's queue, which must still be one this endpoint
	// may feed: a human who narrowed the ceiling narrowed replays too.
	h, err := a.st.Webhook(ctx, e.WebhookID)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(c.Endpoint.Queues, h.Queue) && !slices.Contains(c.Endpoint.Ceiling.Queues, h.Queue) {
		return nil, errorf(CodeForbidden, "queue %q is outside this endpoint's queues and webhook ceiling", h.Queue)
	}
	t, err := a.st.ReplayWebhookEvent(ctx, e.ID, c.Endpoint.ID, c.Actor, ingest.ReplayOptions)
	if err != nil {
		return nil, err
	}
	return ackResult{Todo: compact(t)}, nil
}

// JSONText is raw bytes as a JSON string can carry them unchanged: as they are
// when they are UTF-8 text, else base64. The encoding ("utf-8" or "base64") goes
// beside them in the answer. The CLI's todo show gives a payload the same way.
func JSONText(raw string) (text, encoding string) {
	if utf8.ValidString(raw) {
		return raw, "utf-8"
	}
	return base64.StdEncoding.EncodeToString([]byte(raw)), "base64"
}
