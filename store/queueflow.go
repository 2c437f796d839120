package store

import (
	"context"
	"fmt"
)

// QueueFlow counts, per queue, the todos folded into a pending one (coalesced)
// and the deliveries a webhook rule filtered out: what /metrics shows.
type QueueFlow struct {
	Queue     string `json:"queue"`
	Coalesced int64  `json:"coalesced"`
	Filtered  int64  `json:"filtered"`
}

// QueueFlows reads every queue's flow counters.
func (s *Store) QueueFlows(ctx context.Context) ([]QueueFlow, error) {
	rows, err := s.query(ctx, `SELECT queue, coalesced, filtered FROM queue_flow ORDER BY queue`)
	if err != nil {
		return nil, fmt.Errorf("store: read queue flows: %w", err)
	}
	defer rows.Close()
	var out []QueueFlow
	for rows.Next() {
		var f QueueFlow
		if err := rows.Scan(&f.Queue, &f.Coalesced, &f.Filtered); err != nil {
			return nil, fmt.Errorf("store: read queue flows: %w", err)
		}
		out = append(out, f)
	}
	return out, rows.Err()
}
