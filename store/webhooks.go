package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// Webhook is one ingest URL and where its deliveries go. Its secrets are never part
// of it: WebhookByToken hands them to the receiver, and create/rotate return the new
// one once.
type Webhook struct {
	ID          int64  `json:"webhook_id"`
	Token       string `json:"-"` // the ingest URL's last segment; edges build the URL
	SourceType  string `json:"source_type"`
	Queue       string `json:"queue"`
	Description string `json:"description,omitempty"`
	CreatedBy   string `json:"created_by"`
	EndpointID  int64  `json:"endpoint_id,omitempty"` // 0: made by a human for no endpoint
	// SecretEncrypted says whether the signing secret is sealed at rest.
	SecretEncrypted   bool       `json:"secret_encrypted"`
	CreatedAt         time.Time  `json:"created_at"`
	RotatedAt         *time.Time `json:"rotated_at,omitempty"`
	PreviousExpiresAt *time.Time `json:"previous_secret_expires_at,omitempty"`
	DeletedAt         *time.Time `json:"deleted_at,omitempty"`
	// Rules: which deliveries make a todo and how (see ingest.Rules); empty: all, plainly.
	Rules map[string]any `json:"rules,omitempty"`

	secrets   SecretsVersion // set by WebhookByToken
	rulesText string         // Rules as stored
}

// RulesJSON is the webhook's rules as stored; empty when it has none.
func (h Webhook) RulesJSON() []byte { return []byte(h.rulesText) }

// setRules fills the webhook's rules from their stored text.
func (h *Webhook) setRules(text string) {
	h.rulesText, h.Rules = text, nil
	if text != "" {
		json.Unmarshal([]byte(text), &h.Rules) // written by SetWebhookRules or CreateWebhook: JSON
	}
}

// SecretsVersion names a webhook's signing secrets as they were sealed when read:
// a rotation, or resealing under a new key, changes it. A receiver that verifies
// deliveries against secrets it read earlier passes it to RecordDelivery, which
// answers ErrStale if the secrets have changed since, so a cached secret is never
// trusted past its rotation.
type SecretsVersion struct{ current, previous string }

// SecretsVersion is the version of the secrets WebhookByToken returned with h.
func (h Webhook) SecretsVersion() SecretsVersion { return h.secrets }

// PreviousSecretLive reports whether, at now, the secret h was rotated away from
// still verifies: its grace period has not ended.
func (h Webhook) PreviousSecretLive(now time.Time) bool {
	return h.PreviousExpiresAt != nil && now.Before(*h.PreviousExpiresAt)
}

// NewWebhook is what CreateWebhook needs. The caller mints the secret in the form
// the source type's producers expect; the store only keeps it.
type NewWebhook struct {
	SourceType  string
	Queue       string
	Description string
	Secret      string
	CreatedBy   string // human:<id> or agent:<id>
	EndpointID  int64  // the endpoint the webhook belongs to; 0 = none
	// CheckCeiling enforces the endpoint's webhook ceiling inside the same
	// transaction as the insert, so concurrent creates cannot overshoot it.
	CheckCeiling bool
	// Rules as JSON, checked by the caller (ingest.ParseRules); nil: none.
	Rules []byte
}

// ErrCeilingExceeded: creating the webhook would exceed the endpoint's ceiling.
var ErrCeilingExceeded = errors.New("webhook ceiling exceeded")

// CeilingError says which limit of the ceiling a create would break.
type CeilingError struct {
	Limit string // e.g. "at most 2 webhooks (2 exist)"
}

func (e *CeilingError) Error() string { return "webhook ceiling exceeded: " + e.Limit }
func (e *CeilingError) Unwrap() error { return ErrCeilingExceeded }

// maxDescription bounds a webhook's description.
const maxDescription = 1024

// newWebhookToken mints a URL token: 32 random bytes, base64url. It only routes; the
// provider signature authenticates.
func newWebhookToken() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("store: mint webhook token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// secretAD is the additional data a webhook's secrets are sealed with: a sealed
// secret opens only in the row it was sealed for.
func secretAD(id int64) string { return fmt.Sprintf("webhook:%d", id) }

func webhookTarget(id int64) string { return fmt.Sprintf("webhook:%d", id) }

// CreateWebhook stores a webhook with its signing secret (sealed when a key is
// configured) and returns it.
func (s *Store) CreateWebhook(ctx context.Context, n NewWebhook) (Webhook, error) {
	if err := CheckSourceTypes(n.SourceType); err != nil {
		return Webhook{}, fmt.Errorf("store: create webhook: %w", err)
	}
	switch {
	case !ValidQueueName(n.Queue):
		return Webhook{}, fmt.Errorf("store: create webhook: queue %q: %w", n.Queue, ErrInvalid)
	case n.Secret == "":
		return Webhook{}, fmt.Errorf("store: create webhook: empty secret: %w", ErrInvalid)
	case !secretText(n.Secret):
		return Webhook{}, fmt.Errorf("store: create webhook: %s: %w", errSecretNotText, ErrInvalid)
	case len(n.Description) > maxDescription:
		return Webhook{}, fmt.Errorf("store: create webhook: description longer than %d bytes: %w", maxDescription, ErrInvalid)
	case n.CreatedBy == "":
		return Webhook{}, fmt.Errorf("store: create webhook: no creator: %w", ErrInvalid)
	case n.CheckCeiling && n.EndpointID == 0:
		return Webhook{}, fmt.Errorf("store: create webhook: a ceiling needs an endpoint: %w", ErrInvalid)
	}
	token, err := newWebhookToken()
	if err != nil {
		return Webhook{}, err
	}
	var id int64
	err = s.write(ctx, func(w *wtx) error {
		if n.CheckCeiling {
			if err := w.checkCeiling(n); err != nil {
				return err
			}
		}
		// The row id is the sealing's additional data, so the row exists before its
		// secret does.
		err := w.queryRow(`INSERT INTO webhooks (token, source_type, queue, description, signing_secret, created_by,
				endpoint_id, created_at, rules) VALUES (?, ?, ?, ?, '', ?, ?, ?, ?) RETURNING id`,
			token, n.SourceType, n.Queue, n.Description, n.CreatedBy, nullID(n.EndpointID), ms(w.now),
			string(n.Rules)).Scan(&id)
		if err != nil {
			return fmt.Errorf("store: create webhook: %w", err)
		}
		if err := w.refusePlaintextBesideSealed("create webhook"); err != nil {
			return err
		}
		sealed, err := s.box.Seal(n.Secret, secretAD(id))
		if err != nil {
			return err
		}
		if _, err := w.exec(`UPDATE webhooks SET signing_secret = ? WHERE id = ?`, sealed, id); err != nil {
			return fmt.Errorf("store: create webhook %d: store secret: %w", id, err)
		}
		return w.audit(n.CreatedBy, "webhook.create", webhookTarget(id), "",
			fmt.Sprintf("source=%s queue=%s endpoint=%d", n.SourceType, n.Queue, n.EndpointID))
	})
	if err != nil {
		return Webhook{}, err
	}
	return s.Webhook(ctx, id)
}

// checkCeiling reads the endpoint's ceiling inside the write, so a human's edit
// applies to the next create and two creates cannot both take the last slot.
func (w *wtx) checkCeiling(n NewWebhook) error {
	var max int
	var srcRaw, qRaw string
	var revoked sql.NullInt64
	read := `SELECT max_webhooks, webhook_sources, webhook_queues, revoked_at FROM endpoints WHERE id = ?`
	if w.w.s.pg {
		// Writers run side by side there: the endpoint's row lock makes two creates
		// (from two processes) count one after the other, so both cannot take the
		// last slot. SQLite's single writer serialises them already.
		read = `SELECT max_webhooks, webhook_sources, webhook_queues, revoked_at FROM endpoints WHERE id = ? FOR UPDATE`
	}
	err := w.queryRow(read, n.EndpointID).Scan(&max, &srcRaw, &qRaw, &revoked)
	if notFound(err) || (err == nil && revoked.Valid) {
		return fmt.Errorf("store: create webhook: endpoint %d: %w", n.EndpointID, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("store: create webhook: read ceiling of endpoint %d: %w", n.EndpointID, err)
	}
	var sources, queues []string
	if err := json.Unmarshal([]byte(srcRaw), &sources); err != nil {
		return fmt.Errorf("store: create webhook: decode ceiling of endpoint %d: %w", n.EndpointID, err)
	}
	if err := json.Unmarshal([]byte(qRaw), &queues); err != nil {
		return fmt.Errorf("store: create webhook: decode ceiling of endpoint %d: %w", n.EndpointID, err)
	}
	if !contains(sources, n.SourceType) {
		return &CeilingError{Limit: fmt.Sprintf("source type %q is not allowed (allowed: %s)", n.SourceType, listOrNone(sources))}
	}
	if !contains(queues, n.Queue) {
		return &CeilingError{Limit: fmt.Sprintf("queue %q is not allowed (allowed: %s)", n.Queue, listOrNone(queues))}
	}
	var count int
	if err := w.queryRow(`SELECT count(*) FROM webhooks WHERE endpoint_id = ? AND deleted_at IS NULL`,
		n.EndpointID).Scan(&count); err != nil {
		return fmt.Errorf("store: create webhook: count webhooks of endpoint %d: %w", n.EndpointID, err)
	}
	if count >= max {
		return &CeilingError{Limit: fmt.Sprintf("at most %d webhooks (%d exist)", max, count)}
	}
	return nil
}

func listOrNone(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	return strings.Join(l, ", ")
}

const webhookColumns = `id, token, source_type, queue, description, created_by, coalesce(endpoint_id, 0),
	signing_secret LIKE 'enc:v1:%', created_at, rotated_at, previous_expires_at, deleted_at, rules`

func scanWebhook(sc scanner) (Webhook, error) {
	var h Webhook
	var created int64
	var rotated, prevExp, deleted sql.NullInt64
	var rules string
	err := sc.Scan(&h.ID, &h.Token, &h.SourceType, &h.Queue, &h.Description, &h.CreatedBy, &h.EndpointID,
		&h.SecretEncrypted, &created, &rotated, &prevExp, &deleted, &rules)
	if err != nil {
		return Webhook{}, err
	}
	h.setRules(rules)
	h.CreatedAt = fromMS(created)
	h.RotatedAt, h.PreviousExpiresAt, h.DeletedAt = fromNullMS(rotated), fromNullMS(prevExp), fromNullMS(deleted)
	return h, nil
}

// Webhook loads one webhook, deleted or not.
func (s *Store) Webhook(ctx context.Context, id int64) (Webhook, error) {
	h, err := scanWebhook(s.queryRow(ctx, `SELECT `+webhookColumns+` FROM webhooks WHERE id = ?`, id))
	if notFound(err) {
		return Webhook{}, fmt.Errorf("store: webhook %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Webhook{}, fmt.Errorf("store: load webhook %d: %w", id, err)
	}
	return h, nil
}

// WebhookFilter selects webhooks for ListWebhooks.
type WebhookFilter struct {
	EndpointID     int64 // 0 = every endpoint's and the humans'
	IncludeDeleted bool
}

// ListWebhooks lists webhooks, newest first.
func (s *Store) ListWebhooks(ctx context.Context, f WebhookFilter) ([]Webhook, error) {
	var where []string
	var args []any
	if f.EndpointID != 0 {
		where, args = append(where, "endpoint_id = ?"), append(args, f.EndpointID)
	}
	if !f.IncludeDeleted {
		where = append(where, "deleted_at IS NULL")
	}
	q := `SELECT ` + webhookColumns + ` FROM webhooks`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.query(ctx, q+" ORDER BY id DESC", args...)
	if err != nil {
		return nil, fmt.Errorf("store: list webhooks: %w", err)
	}
	defer rows.Close()
	out := []Webhook{}
	for rows.Next() {
		h, err := scanWebhook(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list webhooks: %w", err)
		}
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list webhooks: %w", err)
	}
	return out, nil
}

// WebhookByToken resolves an ingest URL's token to its live webhook and the secrets
// a delivery may be signed with: the current one, then the previous one while its
// rotation grace lasts. Unknown and deleted tokens are both ErrNotFound.
func (s *Store) WebhookByToken(ctx context.Context, token string) (Webhook, []string, error) {
	var cur string
	var prev sql.NullString
	var h Webhook
	var created int64
	var rotated, prevExp sql.NullInt64
	var rules string
	err := s.queryRow(ctx, `SELECT id, source_type, queue, created_by, coalesce(endpoint_id, 0), created_at,
			rotated_at, previous_expires_at, signing_secret, previous_secret, rules
		FROM webhooks WHERE token = ? AND deleted_at IS NULL`, token).Scan(&h.ID, &h.SourceType, &h.Queue,
		&h.CreatedBy, &h.EndpointID, &created, &rotated, &prevExp, &cur, &prev, &rules)
	if notFound(err) {
		return Webhook{}, nil, fmt.Errorf("store: webhook token: %w", ErrNotFound)
	}
	if err != nil {
		return Webhook{}, nil, fmt.Errorf("store: look up webhook token: %w", err)
	}
	h.Token, h.SecretEncrypted, h.CreatedAt = token, Sealed(cur), fromMS(created)
	h.RotatedAt, h.PreviousExpiresAt = fromNullMS(rotated), fromNullMS(prevExp)
	h.secrets = SecretsVersion{current: cur, previous: prev.String}
	h.setRules(rules)
	secret, err := s.box.Open(cur, secretAD(h.ID))
	if err != nil {
		return Webhook{}, nil, err
	}
	secrets := []string{secret}
	if prev.Valid && h.PreviousSecretLive(s.now()) {
		p, err := s.box.Open(prev.String, secretAD(h.ID))
		if err != nil {
			return Webhook{}, nil, err
		}
		secrets = append(secrets, p)
	}
	return h, secrets, nil
}

// scoped is the WHERE clause that confines a change to one endpoint's webhooks
// when endpointID is not 0 (an agent), and allows any webhook when it is (a human).
const scoped = `(? = 0 OR endpoint_id = ?)`

// RotateWebhook replaces a live webhook's signing secret. The old one stays valid
// for grace (0: not at all), so a producer can be updated without dropping
// deliveries; a rotation during a grace period ends the older secret at once.
// endpointID confines the change to that endpoint's webhooks (0: any).
func (s *Store) RotateWebhook(ctx context.Context, id, endpointID int64, secret string, grace time.Duration, actor string) (Webhook, error) {
	if secret == "" {
		return Webhook{}, fmt.Errorf("store: rotate webhook %d: empty secret: %w", id, ErrInvalid)
	}
	if !secretText(secret) {
		return Webhook{}, fmt.Errorf("store: rotate webhook %d: %s: %w", id, errSecretNotText, ErrInvalid)
	}
	if grace < 0 {
		return Webhook{}, fmt.Errorf("store: rotate webhook %d: negative grace: %w", id, ErrInvalid)
	}
	sealed, err := s.box.Seal(secret, secretAD(id))
	if err != nil {
		return Webhook{}, err
	}
	err = s.write(ctx, func(w *wtx) error {
		if err := w.refusePlaintextBesideSealed(fmt.Sprintf("rotate webhook %d", id)); err != nil {
			return err
		}
		// The previous secret is copied as stored: it was sealed for this same row.
		prevExp := any(nil)
		if grace > 0 {
			prevExp = ms(w.now.Add(grace))
		}
		res, err := w.exec(`UPDATE webhooks SET
				previous_secret = CASE WHEN CAST(? AS INTEGER) IS NULL THEN NULL ELSE signing_secret END,
				previous_expires_at = ?, signing_secret = ?, rotated_at = ?
			WHERE id = ? AND deleted_at IS NULL AND `+scoped,
			prevExp, prevExp, sealed, ms(w.now), id, endpointID, endpointID)
		if err != nil {
			return fmt.Errorf("store: rotate webhook %d: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: rotate webhook %d: %w", id, ErrNotFound)
		}
		return w.audit(actor, "webhook.rotate", webhookTarget(id), "", "grace="+grace.String())
	})
	if err != nil {
		return Webhook{}, err
	}
	return s.Webhook(ctx, id)
}

// DeleteWebhook retires a live webhook: its URL answers as unknown from now on and
// its secrets are erased. The row and its event history stay. endpointID confines
// the change to that endpoint's webhooks (0: any).
func (s *Store) DeleteWebhook(ctx context.Context, id, endpointID int64, actor string) error {
	return s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`UPDATE webhooks SET deleted_at = ?, signing_secret = '', previous_secret = NULL,
				previous_expires_at = NULL
			WHERE id = ? AND deleted_at IS NULL AND `+scoped, ms(w.now), id, endpointID, endpointID)
		if err != nil {
			return fmt.Errorf("store: delete webhook %d: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: delete webhook %d: %w", id, ErrNotFound)
		}
		return w.audit(actor, "webhook.delete", webhookTarget(id), "", "")
	})
}

// secretText reports whether a signing secret is text both databases keep as it
// is: UTF-8 without a NUL. PostgreSQL's text keeps nothing else, and a secret
// changed by a byte verifies no delivery.
func secretText(secret string) bool {
	return utf8.ValidString(secret) && !strings.ContainsRune(secret, 0)
}

// errSecretNotText says what secretText refuses.
const errSecretNotText = "the secret is not UTF-8 text (or holds a NUL byte)"
