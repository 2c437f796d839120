package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// These tests race two stores on one PostgreSQL schema, as two processes would:
// there, unlike on SQLite, their writes run side by side, so a check-then-act that
// one writer made safe can fail. They skip without SWITCHBOARD_TEST_POSTGRES.

// twoWriters opens two stores on one fresh PostgreSQL schema.
func twoWriters(t *testing.T) (a, b *Store) {
	t.Helper()
	return openTwo(t, testkit.PostgresURL(t))
}

// otherProcessTx opens a transaction on s's database through a connection of its
// own, as another process's write in progress; rolled back when t ends unless
// committed.
func otherProcessTx(t *testing.T, s *Store) (*sql.DB, *sql.Tx) {
	t.Helper()
	db, err := sql.Open("pgx", s.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tx, err := db.BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tx.Rollback() })
	return db, tx
}

// openTwo opens two stores on db, as two processes would, closed when t ends.
func openTwo(t *testing.T, db string) (a, b *Store) {
	t.Helper()
	for _, s := range []**Store{&a, &b} {
		st, err := Open(context.Background(), db, Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		*s = st
	}
	return a, b
}

// Copies of one delivery arriving at two processes at once (a provider retrying
// while the first attempt is still in flight) make one event and one todo; every
// other copy is answered as a duplicate of it, never with an error. Keyed by the
// delivery id, and by the replay key alone.
func TestTwoWritersRecordOneDeliveryOnce(t *testing.T) {
	a, b := twoWriters(t)
	ctx := context.Background()
	h := mustWebhook(t, a, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "human:1"})
	const rounds, copies = 20, 4
	for r := range rounds {
		for _, d := range []NewDelivery{
			{WebhookID: h.ID, DeliveryID: fmt.Sprintf("d-%d", r), TrustMode: "signed", Body: []byte("{}")},
			{WebhookID: h.ID, ReplayKey: []byte(fmt.Sprintf("k-%d", r)), TrustMode: "signed", Body: []byte("{}")},
		} {
			results := make([]DeliveryResult, 2*copies)
			errs := make([]error, 2*copies)
			var wg sync.WaitGroup
			for i := range results {
				s := a
				if i%2 == 1 {
					s = b
				}
				wg.Go(func() { results[i], errs[i] = s.RecordDelivery(ctx, d) })
			}
			wg.Wait()
			firsts := 0
			for i, res := range results {
				if errs[i] != nil {
					t.Fatalf("round %d, copy %d: %v", r, i, errs[i])
				}
				if !res.Duplicate {
					firsts++
				}
				if res.EventID != results[0].EventID || res.TodoID != results[0].TodoID {
					t.Fatalf("round %d: copies answered with different events: %+v and %+v", r, results[0], res)
				}
			}
			if firsts != 1 {
				t.Fatalf("round %d: %d copies recorded as new, want 1", r, firsts)
			}
		}
	}
	if n := countRows(t, a, "webhook_events"); n != 2*rounds {
		t.Fatalf("%d events, want %d", n, 2*rounds)
	}
	if n := countRows(t, a, "todos"); n != 2*rounds {
		t.Fatalf("%d todos, want %d", n, 2*rounds)
	}
}

// An agent creating webhooks from two processes at once never goes over its
// endpoint's ceiling: each create counts after the other has committed.
func TestTwoWritersCreateWebhooksUpToTheCeiling(t *testing.T) {
	a, b := twoWriters(t)
	ctx := context.Background()
	const ceiling, tries = 3, 16
	ep := ceilingEndpoint(t, a, ceiling, []string{"github"}, []string{"inbox"})
	errs := make([]error, tries)
	var wg sync.WaitGroup
	for i := range errs {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			_, errs[i] = s.CreateWebhook(ctx, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x",
				CreatedBy: "agent:bot", EndpointID: ep.ID, CheckCeiling: true})
		})
	}
	wg.Wait()
	made := 0
	for _, err := range errs {
		switch {
		case err == nil:
			made++
		case !errors.Is(err, ErrCeilingExceeded):
			t.Fatalf("create: %v, want success or the ceiling", err)
		}
	}
	live, err := a.ListWebhooks(ctx, WebhookFilter{EndpointID: ep.ID})
	if err != nil {
		t.Fatal(err)
	}
	if made != ceiling || len(live) != ceiling {
		t.Fatalf("%d creates succeeded and %d webhooks live, want %d: the ceiling", made, len(live), ceiling)
	}
}

// A delivery that took its event id first but commits last (another process's,
// slower) is still counted, on the charts and on the Webhooks page: neither may
// move its mark past an id that is not committed yet. Both wait for it instead.
func TestEventCountsWaitForAnEarlierIdStillInFlight(t *testing.T) {
	a, b := twoWriters(t)
	ctx := context.Background()
	h := mustWebhook(t, a, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "human:1"})
	charts, err := b.NewChartSampler(ctx, ChartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The slow delivery, as RecordDelivery writes it: the lock, then the id.
	_, slow := otherProcessTx(t, a)
	var early int64
	if _, err := slow.Exec(`SELECT ` + pgEventsLock); err != nil {
		t.Fatal(err)
	}
	if err := slow.QueryRow(`SELECT nextval('webhook_events_id_seq')`).Scan(&early); err != nil {
		t.Fatal(err)
	}
	late, err := b.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: "late", TrustMode: "signed", Body: []byte("{}")})
	if err != nil || late.EventID <= early {
		t.Fatalf("the second delivery: %+v, %v; want an id above %d", late, err, early)
	}
	// While the earlier id is uncommitted, neither count can settle.
	waiting, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if st, err := b.WebhookDeliveryStats(waiting); err == nil {
		t.Fatalf("delivery stats counted %+v while event %d was uncommitted", st, early)
	}
	if err := charts.Sample(waiting); err == nil {
		t.Fatalf("the chart sample counted while event %d was uncommitted", early)
	}
	if _, err := slow.Exec(`INSERT INTO webhook_events (id, webhook_id, delivery_id, received_at, body, size, verified, trust_mode)
		VALUES ($1, $2, 'early', 0, '', 0, 1, 'signed')`, early, h.ID); err != nil {
		t.Fatal(err)
	}
	if err := slow.Commit(); err != nil {
		t.Fatal(err)
	}
	st, err := b.WebhookDeliveryStats(ctx)
	if err != nil || st[h.ID].Deliveries != 2 {
		t.Fatalf("delivery stats: %+v, %v; want 2 deliveries", st, err)
	}
	if err := charts.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	if n := chartDeliveries(t, b, h.ID); n != 2 {
		t.Fatalf("the chart counts %d deliveries, want 2", n)
	}
}

// chartDeliveries sums the deliveries on webhook id's chart of the last hour.
func chartDeliveries(t *testing.T, s *Store, id int64) int64 {
	t.Helper()
	minutes, err := s.WebhookMinutes(context.Background(), id, time.Now().Add(-time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, m := range minutes {
		n += m.Deliveries
	}
	return n
}

// Two serve processes on one database each run a chart sampler: every delivery is
// counted once on the webhook's chart, not once by each.
func TestTwoSamplersCountEachDeliveryOnce(t *testing.T) {
	a, b := twoWriters(t)
	ctx := context.Background()
	h := mustWebhook(t, a, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "human:1"})
	var samplers []*ChartSampler
	for _, s := range []*Store{a, b} {
		c, err := s.NewChartSampler(ctx, ChartOptions{})
		if err != nil {
			t.Fatal(err)
		}
		samplers = append(samplers, c)
	}
	for i := range 6 {
		s := []*Store{a, b}[i%2]
		if _, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: fmt.Sprint(i), TrustMode: "signed", Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
		if i%3 == 2 { // both sample, at once, twice
			var wg sync.WaitGroup
			errs := make([]error, len(samplers))
			for j, c := range samplers {
				wg.Go(func() { errs[j] = c.Sample(ctx) })
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := chartDeliveries(t, a, h.ID); n != 6 {
		t.Fatalf("the chart counts %d deliveries, want 6", n)
	}
}

// An approval from the CLI while serve's module supervisor records a newer
// definition of the tool pins nothing the human did not review: the newer one
// stays pending, and the approval is answered as stale.
func TestApprovalRacingARedefinitionPinsOnlyWhatWasReviewed(t *testing.T) {
	a, b := twoWriters(t)
	ctx := context.Background()
	old, reviewed, newer := strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)
	if err := a.PinTool(ctx, "git", "git_log", old, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.WithholdTool(ctx, "git", "git_log", reviewed, nil); err != nil {
		t.Fatal(err)
	}
	// The supervisor's write of the newer definition, not committed yet.
	other, redefine := otherProcessTx(t, a)
	if _, err := redefine.Exec(`UPDATE tool_pins SET pending_hash = $1 WHERE module = 'git' AND tool = 'git_log'`, newer); err != nil {
		t.Fatal(err)
	}
	approved := make(chan error, 1)
	go func() {
		_, err := b.ApprovePendingTool(ctx, "git", "git_log", reviewed, "human:1")
		approved <- err
	}()
	// The approval has read the reviewed definition as pending and waits for the
	// row: now the newer one commits.
	for waiting := 0; waiting == 0; time.Sleep(5 * time.Millisecond) {
		if err := other.QueryRow(`SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'
			AND query LIKE 'UPDATE tool_pins SET hash = pending_hash%'`).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
	}
	if err := redefine.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-approved; !errors.Is(err, ErrStale) {
		t.Fatalf("approve: %v, want ErrStale", err)
	}
	pins, err := a.ListToolPins(ctx, "git")
	if err != nil || len(pins) != 1 || pins[0].Hash != old || pins[0].PendingHash != newer {
		t.Fatalf("pins: %+v, %v; want %.8s… pinned and %.8s… pending", pins, err, old, newer)
	}
}
