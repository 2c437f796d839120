// Package reaper keeps the queue honest without an agent's help: on a ticker it
// requeues claimed todos whose lease has expired (or dead-letters them when their
// attempts are used up), deletes done todos older than the retention period,
// deletes webhook events older than the event retention that no todo needs any
// more, the charts' minutes older than store.ChartHistory, and, only when asked,
// audit rows older than the audit retention.
//
// It holds no SQL and no state of its own: each pass is a few store calls, so a
// missed or doubled pass does no harm.
package reaper

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// Options configure New. The zero value is usable.
type Options struct {
	// Interval between passes (default 30 s).
	Interval time.Duration
	// Retention is how long done todos are kept (default 30 days).
	Retention time.Duration
	// EventRetention: a webhook event that no todo needs any more is deleted
	// this long after it arrived (default 90 days). Until then it still answers
	// redeliveries as duplicates.
	EventRetention time.Duration
	// KeepEvents turns event deletion off.
	KeepEvents bool
	// AuditRetention, when positive, deletes audit rows this much older than
	// now. Zero keeps the audit log whole (the default: it is append-only).
	AuditRetention time.Duration
	// Now is the clock that dates the retention cutoff (default: the store's).
	// Lease expiry is judged by the store's own clock.
	Now func() time.Time
	// Logger receives a line per pass that did something. Default slog.Default().
	Logger *slog.Logger
	// Leads, when set, says whether this process holds the reaper's role among
	// several on one database (see store.RoleReaper); a pass is made only while
	// it does. Nil: always.
	Leads func() bool
}

// Reaper runs passes over a store.
type Reaper struct {
	st   *store.Store
	opts Options
	log  *slog.Logger
	kick chan struct{}
}

// Result is what one pass did.
type Result struct {
	Requeued     int
	DeadLettered int
	Pruned       int64
	EventsPruned int64
	AuditPruned  int64
}

// New returns a reaper for st.
func New(st *store.Store, opts Options) *Reaper {
	if opts.Interval <= 0 {
		opts.Interval = 30 * time.Second
	}
	if opts.Retention <= 0 {
		opts.Retention = 30 * 24 * time.Hour
	}
	if opts.EventRetention <= 0 {
		opts.EventRetention = 90 * 24 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = st.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Reaper{st: st, opts: opts, log: opts.Logger, kick: make(chan struct{}, 1)}
}

// Run makes a pass at once, then every Interval and at each Kick, until ctx
// ends. A failed pass is logged and retried at the next tick. While Leads says
// another process holds the role, only this process's own backoff doorbells are
// rung (RingDue).
func (r *Reaper) Run(ctx context.Context) error {
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	for {
		if r.opts.Leads != nil && !r.opts.Leads() {
			r.st.RingDue()
		} else if _, err := r.RunOnce(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("reaper pass failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-r.kick:
		}
	}
}

// Kick asks Run for a pass now: this process has just taken the reaper's role,
// and the leases that expired while no one held it should not wait an Interval.
func (r *Reaper) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// RunOnce makes one pass: requeue or dead-letter expired leases, prune done todos
// finished before now minus Retention, then prune events no todo needs that were
// received before now minus EventRetention, the charts' old minutes, expired
// OAuth codes and tokens, and the login throttle's old keys.
func (r *Reaper) RunOnce(ctx context.Context) (Result, error) {
	var res Result
	// Doorbells for backoffs that ended, should their timer have been late.
	r.st.RingDue()
	reaped, err := r.st.ReapExpired(ctx)
	if err != nil {
		return res, fmt.Errorf("reaper: reap expired leases: %w", err)
	}
	res.Requeued, res.DeadLettered = reaped.Requeued, reaped.DeadLettered
	res.Pruned, err = r.st.PruneDone(ctx, r.opts.Now().Add(-r.opts.Retention))
	if err != nil {
		return res, fmt.Errorf("reaper: prune done todos: %w", err)
	}
	if !r.opts.KeepEvents {
		res.EventsPruned, err = r.st.PruneEvents(ctx, r.opts.Now().Add(-r.opts.EventRetention))
		if err != nil {
			return res, fmt.Errorf("reaper: prune webhook events: %w", err)
		}
	}
	// Not in Result: a row or two goes every minute, which is no news for the log.
	if _, err := r.st.PruneCharts(ctx, r.opts.Now().Add(-store.ChartHistory)); err != nil {
		return res, fmt.Errorf("reaper: prune chart history: %w", err)
	}
	if _, err := r.st.PruneOAuth(ctx, r.opts.Now().Add(-24*time.Hour)); err != nil {
		return res, fmt.Errorf("reaper: prune expired oauth codes and tokens: %w", err)
	}
	if _, err := r.st.PruneLoginThrottle(ctx); err != nil {
		return res, fmt.Errorf("reaper: prune the login throttle: %w", err)
	}
	if r.opts.AuditRetention > 0 {
		res.AuditPruned, err = r.st.PruneAudit(ctx, r.opts.Now().Add(-r.opts.AuditRetention))
		if err != nil {
			return res, fmt.Errorf("reaper: prune audit rows: %w", err)
		}
	}
	if res != (Result{}) {
		r.log.Info("reaper pass", "requeued", res.Requeued, "dead_lettered", res.DeadLettered, "pruned", res.Pruned,
			"events_pruned", res.EventsPruned, "audit_pruned", res.AuditPruned)
	}
	return res, nil
}
