package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
)

// On PostgreSQL several serve processes may share one database, each with its own
// chart sampler. Each counts its own todo transitions and refusals (in memory), so
// their sums are right; but deliveries are counted from the shared events table,
// and each sampler would count every one of them. There the mark the deliveries
// are counted from is shared too: a row of settings, locked while a sample counts
// past it and moves it, in the sample's own write, so that every event is counted
// once, by whichever sampler gets to it first.

// chartsEventMark names the settings row holding the shared mark.
const chartsEventMark = "charts.event_mark"

// sharedDeliveries counts the deliveries stored after the shared mark up to newest
// (a settled id, see settledEvents), and moves the mark there.
func (c *ChartSampler) sharedDeliveries(ctx context.Context, w *wtx, newest int64) ([]webhookCounts, error) {
	// A first sampler starts the mark where it started: what came before is
	// counted nowhere, as on SQLite.
	if _, err := w.exec(`INSERT OR IGNORE INTO settings (name, value) VALUES (?, ?)`,
		chartsEventMark, strconv.FormatInt(c.eventMark, 10)); err != nil {
		return nil, fmt.Errorf("store: chart sample: start the shared event mark: %w", err)
	}
	var raw string
	if err := w.queryRow(`SELECT value FROM settings WHERE name = ? FOR UPDATE`, chartsEventMark).Scan(&raw); err != nil {
		return nil, fmt.Errorf("store: chart sample: read the shared event mark: %w", err)
	}
	from, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("store: chart sample: the shared event mark %q is not a number", raw)
	}
	to := max(from, newest)
	hooks, err := c.webhookRows(ctx, func(_ context.Context, q string, args ...any) (*sql.Rows, error) {
		return w.query(q, args...)
	}, from, to)
	if err != nil || to == from {
		return hooks, err
	}
	if _, err := w.exec(`UPDATE settings SET value = ? WHERE name = ?`, strconv.FormatInt(to, 10), chartsEventMark); err != nil {
		return nil, fmt.Errorf("store: chart sample: move the shared event mark: %w", err)
	}
	return hooks, nil
}
