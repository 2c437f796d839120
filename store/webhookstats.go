package store

import (
	"context"
	"fmt"
	"time"
)

// DeliveryStats summarises one webhook's stored deliveries for the board.
type DeliveryStats struct {
	Deliveries   int64
	LastDelivery time.Time
}

// WebhookDeliveryStats counts every webhook's stored deliveries and says when the
// newest arrived. Events get increasing ids as they arrive, so the newest is the one
// with the largest id: the count and that id come from the (webhook_id, id) index
// alone, and only one row per webhook is read for its time.
func (s *Store) WebhookDeliveryStats(ctx context.Context) (map[int64]DeliveryStats, error) {
	rows, err := s.query(ctx, `SELECT g.webhook_id, g.n, e.received_at
		FROM (SELECT webhook_id, count(*) AS n, max(id) AS newest FROM webhook_events GROUP BY webhook_id) g
		JOIN webhook_events e ON e.id = g.newest`)
	if err != nil {
		return nil, fmt.Errorf("store: count webhook deliveries: %w", err)
	}
	defer rows.Close()
	out := map[int64]DeliveryStats{}
	for rows.Next() {
		var id, n, last int64
		if err := rows.Scan(&id, &n, &last); err != nil {
			return nil, fmt.Errorf("store: count webhook deliveries: %w", err)
		}
		out[id] = DeliveryStats{Deliveries: n, LastDelivery: fromMS(last)}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: count webhook deliveries: %w", err)
	}
	return out, nil
}
