package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
)

// CredentialPrefix marks Switchboard credentials so they are recognisable in a
// config file or a secret scanner.
const CredentialPrefix = "sb_"

// Endpoint is one agent credential and everything it is allowed to do. The
// credential itself is never stored, only its SHA-256.
type Endpoint struct {
	ID              int64          `json:"endpoint_id"`
	AgentID         string         `json:"agent_id"`
	AgentName       string         `json:"agent_name"`
	OwnerOperatorID int64          `json:"owner_human_id,omitempty"`
	CredentialHint  string         `json:"credential_hint"`
	Verbs           []string       `json:"verbs"`
	Queues          []string       `json:"queues"`
	DefaultLeaseTTL int            `json:"default_lease_ttl_seconds,omitempty"` // 0 = not set
	Ceiling         WebhookCeiling `json:"webhook_ceiling"`
	Capabilities    []string       `json:"capabilities"`
	ToolAllow       []string       `json:"tool_allow,omitempty"`
	ToolDeny        []string       `json:"tool_deny,omitempty"`
	RatePerSecond   float64        `json:"rate_per_second,omitempty"` // 0 = server default
	RateBurst       int            `json:"rate_burst,omitempty"`
	CreatedAt       time.Time      `json:"created_at"`
	RevokedAt       *time.Time     `json:"revoked_at,omitempty"`
	AddQueues       []string       `json:"add_queues"` // where add_todo may put todos
	// CFAccessIdentity acts as it through Cloudflare Access (see cfaccess.go).
	CFAccessIdentity string `json:"cf_access_identity,omitempty"`
	// OAuthGrantID is the grant whose access token authenticated this request
	// (EndpointByOAuthToken); 0 for the endpoint's own bearer.
	OAuthGrantID int64 `json:"-"`
}

// WebhookCeiling bounds the webhooks an agent may create for itself.
type WebhookCeiling struct {
	MaxWebhooks int      `json:"max_webhooks"`
	Sources     []string `json:"sources"`
	Queues      []string `json:"queues"`
}

// EndpointSpec is what an operator sets on an endpoint. In updates, nil fields are kept.
type EndpointSpec struct {
	AgentName       string
	OwnerOperatorID int64
	Verbs           *[]string
	Queues          *[]string
	DefaultLeaseTTL *int // 0 clears it
	MaxWebhooks     *int
	WebhookSources  *[]string
	WebhookQueues   *[]string
	Capabilities    *[]string
	ToolAllow       *[]string
	ToolDeny        *[]string
	RatePerSecond   *float64
	RateBurst       *int
	AddQueues       *[]string
	// CFAccessIdentity: "" clears it (see Endpoint.CFAccessIdentity).
	CFAccessIdentity *string
}

// HashCredential is the stored form of a credential.
func HashCredential(cred string) []byte {
	h := sha256.Sum256([]byte(cred))
	return h[:]
}

// newCredential mints a credential: the prefix and 32 random bytes, base64url.
func newCredential() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("store: mint credential: %w", err)
	}
	return CredentialPrefix + base64.RawURLEncoding.EncodeToString(b), nil
}

// ValidAgentID reports whether id is a usable agent id: 1–64 of a-z 0-9 _ . -,
// starting with a letter or digit.
func ValidAgentID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
		case i > 0 && strings.ContainsRune("_.-", r):
		default:
			return false
		}
	}
	return true
}

func validateSpec(s EndpointSpec) error {
	if s.Verbs != nil {
		if err := CheckVerbs(*s.Verbs); err != nil {
			return err
		}
	}
	if s.WebhookSources != nil {
		if err := CheckSourceTypes(*s.WebhookSources...); err != nil {
			return err
		}
	}
	if s.Queues != nil {
		for _, q := range *s.Queues {
			if !ValidQueueName(q) {
				return fmt.Errorf("queue %q is not a valid queue name: %w", q, ErrInvalid)
			}
		}
	}
	if s.WebhookQueues != nil {
		for _, q := range *s.WebhookQueues {
			if !ValidQueueName(q) {
				return fmt.Errorf("webhook queue %q is not a valid queue name: %w", q, ErrInvalid)
			}
		}
	}
	if s.AddQueues != nil && slices.ContainsFunc(*s.AddQueues, func(q string) bool { return !ValidQueueName(q) }) {
		return fmt.Errorf("an add queue is not a valid queue name: %w", ErrInvalid)
	}
	if s.DefaultLeaseTTL != nil && *s.DefaultLeaseTTL < 0 {
		return fmt.Errorf("default lease must not be negative: %w", ErrInvalid)
	}
	if s.MaxWebhooks != nil && *s.MaxWebhooks < 0 {
		return fmt.Errorf("max webhooks must not be negative: %w", ErrInvalid)
	}
	if s.RatePerSecond != nil && (*s.RatePerSecond < 0 || math.IsNaN(*s.RatePerSecond) || math.IsInf(*s.RatePerSecond, 0)) {
		return fmt.Errorf("rate must be a number, not negative: %w", ErrInvalid)
	}
	if s.RateBurst != nil && *s.RateBurst < 0 {
		return fmt.Errorf("burst must not be negative: %w", ErrInvalid)
	}
	if err := checkCFAccessIdentity(s.CFAccessIdentity); err != nil {
		return err
	}
	return nil
}

func jsonList(p *[]string) string {
	if p == nil || *p == nil {
		return "[]"
	}
	b, _ := json.Marshal(*p)
	return string(b)
}

// CreateEndpoint creates an endpoint for agentID and returns it with its credential,
// which exists nowhere else afterwards.
func (s *Store) CreateEndpoint(ctx context.Context, agentID string, spec EndpointSpec, actor string) (Endpoint, string, error) {
	if !ValidAgentID(agentID) {
		return Endpoint{}, "", fmt.Errorf("store: create endpoint: agent id %q must be 1-64 of a-z 0-9 _ . -: %w", agentID, ErrInvalid)
	}
	if err := validateSpec(spec); err != nil {
		return Endpoint{}, "", fmt.Errorf("store: create endpoint: %w", err)
	}
	if spec.AgentName == "" {
		spec.AgentName = agentID
	}
	cred, err := newCredential()
	if err != nil {
		return Endpoint{}, "", err
	}
	hint := cred[:len(CredentialPrefix)+4] + "…"
	var id int64
	err = s.write(ctx, func(w *wtx) error {
		lease := sql.NullInt64{}
		if spec.DefaultLeaseTTL != nil && *spec.DefaultLeaseTTL > 0 {
			lease = sql.NullInt64{Int64: int64(*spec.DefaultLeaseTTL), Valid: true}
		}
		err := w.queryRow(`INSERT INTO endpoints (agent_id, agent_name, owner_human_id, credential_hash, credential_hint,
				scope_verbs, scope_queues, default_lease_ttl_seconds, max_webhooks, webhook_sources, webhook_queues,
				capabilities, tool_allow, tool_deny, rate_per_second, rate_burst, created_at, add_queues)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
			agentID, spec.AgentName, nullID(spec.OwnerOperatorID), HashCredential(cred), hint,
			jsonList(spec.Verbs), jsonList(spec.Queues), lease, deref(spec.MaxWebhooks),
			jsonList(spec.WebhookSources), jsonList(spec.WebhookQueues), jsonList(spec.Capabilities),
			jsonList(spec.ToolAllow), jsonList(spec.ToolDeny), nullFloat(spec.RatePerSecond), nullInt(spec.RateBurst),
			ms(w.now), jsonList(spec.AddQueues)).Scan(&id)
		if err != nil {
			return fmt.Errorf("store: create endpoint for %s: %w", agentID, err)
		}
		if err := w.setCFAccessIdentity(id, spec.CFAccessIdentity); err != nil {
			return err
		}
		return w.audit(actor, "endpoint.create", endpointTarget(id), "", "agent="+agentID)
	})
	s.creds.changed()
	if err != nil {
		return Endpoint{}, "", err
	}
	ep, err := s.Endpoint(ctx, id)
	return ep, cred, err
}

func endpointTarget(id int64) string { return fmt.Sprintf("endpoint:%d", id) }

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}

func nullFloat(p *float64) any {
	if p == nil || *p == 0 {
		return nil
	}
	return *p
}

func nullInt(p *int) any {
	if p == nil || *p == 0 {
		return nil
	}
	return *p
}

// UpdateEndpoint changes the fields set in spec.
func (s *Store) UpdateEndpoint(ctx context.Context, id int64, spec EndpointSpec, actor string) (Endpoint, error) {
	if err := validateSpec(spec); err != nil {
		return Endpoint{}, fmt.Errorf("store: update endpoint %d: %w", id, err)
	}
	var sets, said []string
	var args []any
	// The audit row says what changed to what (a cleared value: "default").
	set := func(col string, v any) {
		sets, args = append(sets, col+" = ?"), append(args, v)
		if v == nil {
			v = "default"
		}
		said = append(said, fmt.Sprintf("%s=%v", col, v))
	}
	if spec.AgentName != "" {
		set("agent_name", spec.AgentName)
	}
	if spec.Verbs != nil {
		set("scope_verbs", jsonList(spec.Verbs))
	}
	if spec.Queues != nil {
		set("scope_queues", jsonList(spec.Queues))
	}
	if spec.DefaultLeaseTTL != nil {
		set("default_lease_ttl_seconds", nullInt(spec.DefaultLeaseTTL))
	}
	if spec.MaxWebhooks != nil {
		set("max_webhooks", *spec.MaxWebhooks)
	}
	if spec.WebhookSources != nil {
		set("webhook_sources", jsonList(spec.WebhookSources))
	}
	if spec.WebhookQueues != nil {
		set("webhook_queues", jsonList(spec.WebhookQueues))
	}
	if spec.Capabilities != nil {
		set("capabilities", jsonList(spec.Capabilities))
	}
	if spec.ToolAllow != nil {
		set("tool_allow", jsonList(spec.ToolAllow))
	}
	if spec.ToolDeny != nil {
		set("tool_deny", jsonList(spec.ToolDeny))
	}
	if spec.RatePerSecond != nil {
		set("rate_per_second", nullFloat(spec.RatePerSecond))
	}
	if spec.AddQueues != nil {
		set("add_queues", jsonList(spec.AddQueues))
	}
	if spec.RateBurst != nil {
		set("rate_burst", nullInt(spec.RateBurst))
	}
	if spec.CFAccessIdentity != nil {
		set("cf_access_identity", cfAccessValue(*spec.CFAccessIdentity))
	}
	if len(sets) == 0 {
		return s.Endpoint(ctx, id)
	}
	err := s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`UPDATE endpoints SET `+strings.Join(sets, ", ")+` WHERE id = ? AND revoked_at IS NULL`,
			append(args, id)...)
		if isUnique(err) {
			return cfAccessTaken(id, err) // the one unique column an update sets
		}
		if err != nil {
			return fmt.Errorf("store: update endpoint %d: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: update endpoint %d: %w", id, ErrNotFound)
		}
		return w.audit(actor, "endpoint.update", endpointTarget(id), "", strings.Join(said, " "))
	})
	s.creds.changed() // committed (or not): this process's next lookup reads the row again
	if err != nil {
		return Endpoint{}, err
	}
	return s.Endpoint(ctx, id)
}

const endpointColumns = `id, agent_id, agent_name, coalesce(owner_human_id, 0), credential_hint, scope_verbs,
	scope_queues, coalesce(default_lease_ttl_seconds, 0), max_webhooks, webhook_sources, webhook_queues,
	capabilities, tool_allow, tool_deny, coalesce(rate_per_second, 0), coalesce(rate_burst, 0), created_at, revoked_at, add_queues,
	coalesce(cf_access_identity, '')`

func scanEndpoint(sc scanner) (Endpoint, error) {
	var e Endpoint
	var verbs, queues, wsrc, wq, caps, allow, deny, addq string
	var created int64
	var revoked sql.NullInt64
	err := sc.Scan(&e.ID, &e.AgentID, &e.AgentName, &e.OwnerOperatorID, &e.CredentialHint, &verbs, &queues,
		&e.DefaultLeaseTTL, &e.Ceiling.MaxWebhooks, &wsrc, &wq, &caps, &allow, &deny, &e.RatePerSecond,
		&e.RateBurst, &created, &revoked, &addq, &e.CFAccessIdentity)
	if err != nil {
		return e, err
	}
	for _, l := range []struct {
		raw string
		dst *[]string
	}{{verbs, &e.Verbs}, {queues, &e.Queues}, {wsrc, &e.Ceiling.Sources}, {wq, &e.Ceiling.Queues},
		{caps, &e.Capabilities}, {allow, &e.ToolAllow}, {deny, &e.ToolDeny}, {addq, &e.AddQueues}} {
		if err := json.Unmarshal([]byte(l.raw), l.dst); err != nil {
			return e, fmt.Errorf("decode list column: %w", err)
		}
		if *l.dst == nil {
			*l.dst = []string{}
		}
	}
	e.CreatedAt = fromMS(created)
	e.RevokedAt = fromNullMS(revoked)
	return e, nil
}

// Endpoint loads one endpoint, revoked or not.
func (s *Store) Endpoint(ctx context.Context, id int64) (Endpoint, error) {
	e, err := scanEndpoint(s.queryRow(ctx, `SELECT `+endpointColumns+` FROM endpoints WHERE id = ?`, id))
	if notFound(err) {
		return Endpoint{}, fmt.Errorf("store: endpoint %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("store: load endpoint %d: %w", id, err)
	}
	return e, nil
}

// EndpointEpoch is a number that any change to any endpoint moves, from this
// process or another: compare two readings to learn whether endpoints changed.
func (s *Store) EndpointEpoch(ctx context.Context) (int64, error) {
	epoch, err := s.endpointEpoch(ctx)
	if err != nil {
		return 0, fmt.Errorf("store: read endpoint epoch: %w", err)
	}
	return epoch, nil
}

func (s *Store) endpointEpoch(ctx context.Context) (epoch int64, err error) {
	err = s.queryRow(ctx, `SELECT epoch FROM endpoint_epoch WHERE id = 1`).Scan(&epoch)
	return epoch, err
}

// EndpointByCredential resolves a presented credential to its live endpoint. Unknown
// and revoked credentials are both ErrNotFound.
//
// While no endpoint changed, an endpoint this Store found before is answered
// without reading its row again (see credCache). A revocation or an edit made
// through this Store applies from the next call on; one made by another process
// within credWatchFresh while WatchForeign runs, else from the next call on too.
func (s *Store) EndpointByCredential(ctx context.Context, cred string) (Endpoint, error) {
	hash := HashCredential(cred)
	return s.liveEndpointBy(ctx, hash, "credential", `credential_hash = ?`, hash)
}

// ListEndpoints lists endpoints, newest first; revoked ones only when asked.
func (s *Store) ListEndpoints(ctx context.Context, includeRevoked bool) ([]Endpoint, error) {
	q := `SELECT ` + endpointColumns + ` FROM endpoints WHERE revoked_at IS NULL ORDER BY id DESC`
	if includeRevoked {
		q = `SELECT ` + endpointColumns + ` FROM endpoints ORDER BY id DESC`
	}
	rows, err := s.query(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("store: list endpoints: %w", err)
	}
	defer rows.Close()
	var out []Endpoint
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list endpoints: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// DefaultLease reads an endpoint's default lease in seconds (0 = not set). Agents
// read it on every claim so an edit applies without a reconnect.
func (s *Store) DefaultLease(ctx context.Context, endpointID int64) (int, error) {
	var v int
	err := s.queryRow(ctx, `SELECT coalesce(default_lease_ttl_seconds, 0) FROM endpoints WHERE id = ?`, endpointID).Scan(&v)
	if notFound(err) {
		return 0, fmt.Errorf("store: endpoint %d: %w", endpointID, ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("store: read default lease of endpoint %d: %w", endpointID, err)
	}
	return v, nil
}
