package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// WebhookEvent is one verified delivery as it arrived. Listings leave Headers and
// Body empty (PayloadSize says how big the body is); WebhookEvent loads both.
type WebhookEvent struct {
	ID          int64             `json:"event_id"`
	WebhookID   int64             `json:"webhook_id"`
	SourceType  string            `json:"source_type"`
	DeliveryID  string            `json:"delivery_id,omitempty"`
	EventType   string            `json:"event_type,omitempty"`
	ReceivedAt  time.Time         `json:"received_at"`
	Headers     map[string]string `json:"headers,omitempty"`
	Body        []byte            `json:"-"`
	PayloadSize int               `json:"payload_size"`
	Verified    bool              `json:"verified"`
	TrustMode   string            `json:"trust_mode"`
	TodoID      int64             `json:"todo_id,omitempty"`  // 0 once retention pruned the todo
	EndpointID  int64             `json:"-"`                  // the webhook's endpoint, for scope checks
	Filtered    bool              `json:"filtered,omitempty"` // a webhook rule dropped it: no todo
}

// NewDelivery is a delivery whose signature the receiver has verified.
type NewDelivery struct {
	WebhookID  int64
	DeliveryID string // the provider's id, the idempotency key; "" = none given
	// ReplayKey, when set, is a second idempotency key: a hash of what the provider
	// signed, for schemes whose delivery id is unsigned or absent. A delivery that
	// matches a kept event on either key is a redelivery of it.
	ReplayKey []byte
	EventType string
	TrustMode string            // signed or token
	Headers   map[string]string // the selected, non-secret headers to keep
	Body      []byte
	// VerifiedWith is the version of the secrets the signature was checked
	// against (Webhook.SecretsVersion). When set and the webhook's secrets have
	// changed since, RecordDelivery writes nothing and answers ErrStale.
	VerifiedWith SecretsVersion
	// RulesApplied is the webhook's rules (Webhook.Rules) as the receiver read
	// them to decide Filtered and Options. With VerifiedWith set, a webhook whose
	// rules changed since is ErrStale, as for its secrets.
	RulesApplied []byte
	// Filtered: a webhook rule dropped the delivery. It is recorded and
	// deduplicated as any other, and makes no todo.
	Filtered bool
	// Options are the todo's flow control (key, priority, coalescing) from the rules.
	Options TodoOptions
}

// DeliveryResult says what RecordDelivery did. Duplicate: the delivery id or the
// replay key was seen before, and EventID/TodoID are the first delivery's.
type DeliveryResult struct {
	EventID   int64
	TodoID    int64 // 0 when filtered
	Queue     string
	Duplicate bool
	Filtered  bool // a rule dropped it: no todo
	Folded    bool // coalesced into the pending todo TodoID
}

// RecordDelivery stores a verified delivery and creates its todo on the webhook's
// queue, in one transaction: either both are on disk when it returns, or neither
// is, so a failed write never swallows the redelivery meant to recover it. A
// delivery id or replay key already recorded for the webhook creates nothing. A webhook deleted
// since the caller looked it up is ErrNotFound; one whose secrets were rotated since
// the delivery was verified (see NewDelivery.VerifiedWith) is ErrStale.
func (s *Store) RecordDelivery(ctx context.Context, d NewDelivery) (DeliveryResult, error) {
	headers, err := json.Marshal(d.Headers)
	if err != nil {
		return DeliveryResult{}, fmt.Errorf("store: record delivery: encode headers: %w", err)
	}
	if d.Headers == nil {
		headers = []byte("{}")
	}
	var res DeliveryResult
	// It may run again (rerunReq): it sets res afresh and writes only through w.
	err = s.submit(ctx, rerunReq(ctx, func(w *wtx) error {
		res = DeliveryResult{}
		// One statement reads what the delivery needs: the webhook (live?), a first
		// delivery with the same id or replay key, and the ids the event and its todo will take.
		// The ids are taken the way SQLite would take them (the writer holds the
		// write lock, so nobody else can), so that the todo and its event, which
		// point at each other, are both written once: no UPDATE rewrites the body.
		var src, createdBy, rules string
		var firstEvent, firstTodo, replayOf sql.NullInt64
		var todoID int64
		var secrets SecretsVersion
		lookup := deliveryLookup
		if w.w.s.pg {
			lookup = pgDeliveryLookup
			// Sent with the lookup, which runs once the locks are held.
			if err := w.later(fmt.Sprintf("store: record delivery for webhook %d: wait for the same delivery", d.WebhookID),
				pgLockDeliveryKeys, deliveryLockKey("delivery", d.WebhookID, []byte(d.DeliveryID)),
				deliveryLockKey("replay", d.WebhookID, d.ReplayKey)); err != nil {
				return err
			}
		}
		err := w.queryRow(lookup, nullString(d.DeliveryID), nullBytes(d.ReplayKey), d.WebhookID).Scan(
			&src, &res.Queue, &createdBy, &secrets.current, &secrets.previous, &firstEvent, &firstTodo,
			&replayOf, &res.EventID, &todoID, &rules)
		if notFound(err) {
			return fmt.Errorf("store: record delivery: webhook %d: %w", d.WebhookID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: record delivery for webhook %d: %w", d.WebhookID, err)
		}
		if d.VerifiedWith != (SecretsVersion{}) && d.VerifiedWith != secrets {
			return fmt.Errorf("store: record delivery for webhook %d: secrets rotated since it was verified: %w",
				d.WebhookID, ErrStale)
		}
		if d.VerifiedWith != (SecretsVersion{}) && string(d.RulesApplied) != rules {
			return fmt.Errorf("store: record delivery for webhook %d: rules changed since it was read: %w",
				d.WebhookID, ErrStale)
		}
		if firstEvent.Valid && replayOf.Valid && replayOf.Int64 < ms(w.now.Add(-ReplayWindow)) {
			// The same signed bytes as an event older than the window: a producer's
			// new delivery that happens to repeat an old one (two identical GitHub
			// dispatches an hour apart), not a replay. The old event gives up its key
			// (the index keeps one event per key), which only this rare path writes.
			if _, err := w.exec(`UPDATE webhook_events SET replay_key = NULL WHERE id = ?`, firstEvent.Int64); err != nil {
				return fmt.Errorf("store: record delivery for webhook %d: release an old replay key: %w", d.WebhookID, err)
			}
			firstEvent = sql.NullInt64{}
		}
		if firstEvent.Valid {
			// A redelivery: answer with the first one.
			res.EventID, res.TodoID, res.Duplicate = firstEvent.Int64, firstTodo.Int64, true
			return nil
		}
		return w.recordNewDelivery(d, &res, src, createdBy, todoID, headers)
	}))
	return res, err
}

// recordNewDelivery stores a delivery seen for the first time and, unless a rule
// filtered it, its todo (which may fold into the key's pending todo).
func (w *wtx) recordNewDelivery(d NewDelivery, res *DeliveryResult, src, createdBy string, todoID int64, headers []byte) error {
	body := d.Body
	if body == nil {
		body = []byte{} // the column is NOT NULL; an empty body is still a delivery
	}
	var todoRef any
	if d.Filtered {
		res.Filtered = true
		if err := w.later(fmt.Sprintf("store: record delivery for webhook %d: count filtered", d.WebhookID),
			`INSERT INTO queue_flow (queue, filtered) VALUES (?, 1)
			ON CONFLICT (queue) DO UPDATE SET filtered = queue_flow.filtered + 1`, res.Queue); err != nil {
			return err
		}
	} else {
		t, err := w.addTodo(NewTodo{
			id:        todoID,
			Queue:     res.Queue,
			size:      len(body), // the todo reads its payload from the event's body
			Source:    Source{Type: src, WebhookID: d.WebhookID, EventID: res.EventID, EventType: d.EventType},
			Trust:     Trust{Verified: true, Mode: d.TrustMode, WebhookCreatedBy: createdBy},
			CreatedBy: webhookTarget(d.WebhookID),
			Options:   d.Options,
			idOnly:    true,
		})
		if err != nil {
			return err
		}
		res.TodoID, res.Folded, todoRef = t.ID, t.Folded, t.ID
	}
	return w.later(fmt.Sprintf("store: record delivery for webhook %d", d.WebhookID),
		`INSERT INTO webhook_events (id, webhook_id, delivery_id, replay_key, event_type, received_at,
			headers, body, size, verified, trust_mode, todo_id, filtered) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?)`,
		res.EventID, d.WebhookID, nullString(d.DeliveryID), nullBytes(d.ReplayKey), d.EventType, ms(w.now),
		string(headers), body, len(body), d.TrustMode, todoRef, boolInt(d.Filtered))
}

// deliveryLookup reads what recording a delivery needs (see RecordDelivery);
// arguments: the delivery id (or NULL), the replay key (or NULL), the webhook id.
// A match on the delivery id comes first; each key is one probe of its unique
// index, and a NULL one finds nothing.
//
// The CAST is for speed: since SQLite 3.54 a bare "w.id = ?" in a join makes the
// plan depend on whether the id is 0 or 1, so the statement was parsed and planned
// again each time the id changed to or from 1: with webhook 1 and another both busy
// (as in `switchboard bench`), a fifth of the writer's time. The plan is the same
// (TestHotStatementsStayPrepared).
const deliveryLookup = `SELECT w.source_type, w.queue, w.created_by, w.signing_secret,
		coalesce(w.previous_secret, ''), coalesce(e.id, r.id), CASE WHEN e.id IS NULL THEN r.todo_id ELSE e.todo_id END,
		CASE WHEN e.id IS NULL THEN r.received_at END,
		(SELECT coalesce(max(id), 0) + 1 FROM webhook_events), (SELECT coalesce(max(id), 0) + 1 FROM todos), w.rules
	FROM webhooks w LEFT JOIN webhook_events e ON e.webhook_id = w.id AND e.delivery_id = ?
		LEFT JOIN webhook_events r ON r.webhook_id = w.id AND r.replay_key = ?
	WHERE w.id = CAST(? AS INTEGER) AND w.deleted_at IS NULL`

// pgDeliveryLookup is deliveryLookup on PostgreSQL, where several writers may take
// ids at once: the event's and the todo's come from their sequences. The first
// events are found by webhook_delivery_event and webhook_replay_event (migration
// 0022), each one probe of its key's unique index: asked in the join, PostgreSQL
// kept a plan made while the webhook had no events, which read all of them on
// each delivery (TestADeliveryFindsItsFirstByAProbeWhateverTheStatistics).
const pgDeliveryLookup = `SELECT w.source_type, w.queue, w.created_by, w.signing_secret,
		coalesce(w.previous_secret, ''), coalesce(e.id, r.id), CASE WHEN e.id IS NULL THEN r.todo_id ELSE e.todo_id END,
		CASE WHEN e.id IS NULL THEN r.received_at END,
		nextval('webhook_events_id_seq'), nextval('todos_id_seq'), w.rules
	FROM webhooks w LEFT JOIN LATERAL webhook_delivery_event(w.id, ?) e ON true
		LEFT JOIN LATERAL webhook_replay_event(w.id, ?) r ON true
	WHERE w.id = CAST(? AS INTEGER) AND w.deleted_at IS NULL`

// pgLockDeliveryKeys takes, until the transaction ends, a lock on the delivery id
// and one on the replay key (a NULL key takes none), in that order. Several
// writers record deliveries side by side on PostgreSQL: without it, two copies of
// one delivery arriving at two processes at once would both find no first event,
// and the second insert would fail on the unique index instead of being answered
// as a duplicate. The lookup after it is a statement of its own, so that it reads
// what the other copy committed while this one waited. It takes pgEventsLock
// too, before the event's id is taken (see settledEvents).
const pgLockDeliveryKeys = `SELECT ` + pgEventsLock + `, pg_advisory_xact_lock(hashtextextended(CAST(? AS TEXT), 0)),
	pg_advisory_xact_lock(hashtextextended(CAST(? AS TEXT), 0))`

// deliveryLockKey names one idempotency key of a webhook for pgLockDeliveryKeys;
// nil when the delivery has none.
func deliveryLockKey(kind string, webhookID int64, key []byte) any {
	if len(key) == 0 {
		return nil
	}
	return fmt.Sprintf("switchboard.%s.%d.%x", kind, webhookID, key)
}

func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func nullBytes(b []byte) any {
	if len(b) == 0 {
		return nil
	}
	return b
}

// EventFilter selects events for ListWebhookEvents, newest first; pass the last
// row's ID as Before to page.
type EventFilter struct {
	WebhookID  int64 // 0 = every webhook (of EndpointID, when set)
	EndpointID int64 // 0 = every endpoint's and the humans'
	Before     int64
	Limit      int // default 50, at most 500
}

const eventColumns = `e.id, e.webhook_id, w.source_type, coalesce(e.delivery_id, ''), e.event_type, e.received_at,
	e.size, e.verified, e.trust_mode, coalesce(e.todo_id, 0), coalesce(w.endpoint_id, 0), e.filtered`

func scanEvent(sc scanner, extra ...any) (WebhookEvent, error) {
	var e WebhookEvent
	var received int64
	dest := append([]any{&e.ID, &e.WebhookID, &e.SourceType, &e.DeliveryID, &e.EventType, &received,
		&e.PayloadSize, &e.Verified, &e.TrustMode, &e.TodoID, &e.EndpointID, &e.Filtered}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return WebhookEvent{}, err
	}
	e.ReceivedAt = fromMS(received)
	return e, nil
}

// ListWebhookEvents lists events without headers or body, newest first.
func (s *Store) ListWebhookEvents(ctx context.Context, f EventFilter) ([]WebhookEvent, error) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	f.Limit = min(f.Limit, 500)
	var where []string
	var args []any
	if f.WebhookID != 0 {
		where, args = append(where, "e.webhook_id = ?"), append(args, f.WebhookID)
	}
	if f.EndpointID != 0 {
		where, args = append(where, "w.endpoint_id = ?"), append(args, f.EndpointID)
	}
	if f.Before > 0 {
		where, args = append(where, "e.id < ?"), append(args, f.Before)
	}
	q := `SELECT ` + eventColumns + ` FROM webhook_events e JOIN webhooks w ON w.id = e.webhook_id`
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	rows, err := s.query(ctx, q+" ORDER BY e.id DESC LIMIT ?", append(args, f.Limit)...)
	if err != nil {
		return nil, fmt.Errorf("store: list webhook events: %w", err)
	}
	defer rows.Close()
	out := []WebhookEvent{}
	for rows.Next() {
		e, err := scanEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("store: list webhook events: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list webhook events: %w", err)
	}
	return out, nil
}

// WebhookEvent loads one event with its headers and body.
func (s *Store) WebhookEvent(ctx context.Context, id int64) (WebhookEvent, error) {
	var headers string
	var body []byte
	e, err := scanEvent(s.queryRow(ctx, `SELECT `+eventColumns+`, e.headers, e.body
		FROM webhook_events e JOIN webhooks w ON w.id = e.webhook_id WHERE e.id = ?`, id), &headers, &body)
	if notFound(err) {
		return WebhookEvent{}, fmt.Errorf("store: webhook event %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return WebhookEvent{}, fmt.Errorf("store: load webhook event %d: %w", id, err)
	}
	if err := json.Unmarshal([]byte(headers), &e.Headers); err != nil {
		return WebhookEvent{}, fmt.Errorf("store: load webhook event %d: decode headers: %w", id, err)
	}
	e.Body = body
	if e.Body == nil {
		e.Body = []byte{}
	}
	return e, nil
}

// ReplayOptions gives a replayed event's todo its options from its webhook's
// rules as stored (empty: none) and the event's body (ingest.ReplayOptions).
type ReplayOptions func(rules, body []byte) TodoOptions

// ReplayWebhookEvent puts a new todo on the webhook's queue from a stored event: the
// same body and trust, source type "replay", the options opts gives it (nil:
// none), and an audit row naming the event and the new todo. endpointID
// confines it to that endpoint's webhooks (0: any).
func (s *Store) ReplayWebhookEvent(ctx context.Context, eventID, endpointID int64, actor string, opts ReplayOptions) (Todo, error) {
	var t Todo
	err := s.write(ctx, func(w *wtx) error {
		var body []byte
		var eventType, mode, queue, createdBy string
		var rules string
		var webhookID int64
		var verified bool
		err := w.queryRow(`SELECT e.body, e.event_type, e.verified, e.trust_mode, w.id, w.queue, w.created_by, w.rules
			FROM webhook_events e JOIN webhooks w ON w.id = e.webhook_id
			WHERE e.id = ? AND (? = 0 OR w.endpoint_id = ?)`, eventID, endpointID, endpointID).Scan(
			&body, &eventType, &verified, &mode, &webhookID, &queue, &createdBy, &rules)
		if notFound(err) {
			return fmt.Errorf("store: replay webhook event %d: %w", eventID, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: replay webhook event %d: %w", eventID, err)
		}
		var o TodoOptions
		if opts != nil {
			o = opts([]byte(rules), body)
		}
		t, err = w.addTodo(NewTodo{
			Queue:     queue,
			Payload:   string(body),
			Source:    Source{Type: "replay", WebhookID: webhookID, EventID: eventID, EventType: eventType},
			Trust:     Trust{Verified: verified, Mode: mode, WebhookCreatedBy: createdBy},
			CreatedBy: actor,
			Options:   o,
		})
		if err != nil {
			return err
		}
		return w.audit(actor, "webhook_event.replay", fmt.Sprintf("webhook_event:%d", eventID), "",
			fmt.Sprintf("todo=%d queue=%s", t.ID, queue))
	})
	return t, err
}

// ReplaysOf lists the todos made by replaying event id, newest first, at most
// limit of them (the ones retention has not pruned).
func (s *Store) ReplaysOf(ctx context.Context, id int64, limit int) ([]Todo, error) {
	rows, err := s.query(ctx, `SELECT `+todoColumns+` FROM todos INDEXED BY todos_replays
		WHERE source_type = 'replay' AND source_event_id = ? ORDER BY id DESC LIMIT ?`, id, limit)
	if err != nil {
		return nil, fmt.Errorf("store: replays of event %d: %w", id, err)
	}
	out, err := compactTodos(rows)
	if err != nil {
		return nil, fmt.Errorf("store: replays of event %d: %w", id, err)
	}
	return out, nil
}
