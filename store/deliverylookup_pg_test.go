package store

import (
	"context"
	"crypto/sha256"
	"testing"
)

// A delivery on PostgreSQL finds an earlier one with its delivery id or replay
// key by that key's unique index, one probe, whatever the statistics of
// webhook_events say. With none (a table not analysed yet) or stale ones (a new
// webhook's events not in them), PostgreSQL read every event of the webhook
// (webhook_events_webhook) and kept the one with the delivery id: each delivery
// cost more than the one before (2-4 ms at 1,500 events).
func TestADeliveryFindsItsFirstByAProbeWhateverTheStatistics(t *testing.T) {
	const events = 5000
	for _, stats := range statsKinds {
		t.Run(stats, func(t *testing.T) {
			s := pgStore(t)
			ctx := context.Background()
			hook, err := s.CreateWebhook(ctx, NewWebhook{SourceType: "generic", Queue: "q", Secret: "k", CreatedBy: "human:1"})
			if err != nil {
				t.Fatal(err)
			}
			conn := statsConn(t, s, "webhook_events", stats)
			// The statement is planned first while the webhook has no events, as
			// on a webhook's first delivery, and its plan kept.
			lookup := s.q(pgDeliveryLookup)
			for _, mode := range planModes {
				for range runsToKeepAPlan {
					checkReadsFew(t, conn, "webhook_events", lookup, []any{"first", []byte("first"), hook.ID}, "the first delivery", mode, true)
				}
			}
			if _, err := conn.Exec(ctx, `INSERT INTO webhook_events (webhook_id, delivery_id, received_at, body, size, verified, trust_mode, replay_key)
				SELECT $1, md5('d' || i)::uuid::text, 0, '', 0, 1, 'verified', sha256(('r' || i)::bytea) FROM generate_series(1, $2::bigint) i`,
				hook.ID, events); err != nil {
				t.Fatal(err)
			}
			// Delivery ids as GitHub's: GUIDs.
			var seen string
			if err := conn.QueryRow(ctx, `SELECT md5('d4000')::uuid::text`).Scan(&seen); err != nil {
				t.Fatal(err)
			}
			replay := sha256.Sum256([]byte("r4000"))
			for _, c := range []struct {
				name string
				args []any
			}{
				{"a delivery id seen before", []any{seen, nil, hook.ID}},
				{"a replay key seen before", []any{nil, replay[:], hook.ID}},
				{"a new delivery", []any{"new", []byte("new"), hook.ID}},
			} {
				for _, mode := range planModes {
					checkReadsFew(t, conn, "webhook_events", lookup, c.args, c.name, mode, true)
				}
			}
		})
	}
}
