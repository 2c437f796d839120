package reaper

import (
	"context"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/internal/testkit/teststore"
	"github.com/switchboardhq/switchboard/store"
)

func setup(t *testing.T) (*store.Store, *testkit.Clock, *Reaper) {
	t.Helper()
	clk := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := teststore.Open(t, store.Options{Now: clk.Now})
	return st, clk, New(st, Options{Retention: 24 * time.Hour, EventRetention: 48 * time.Hour, Now: clk.Now, Logger: quiet})
}

func add(t *testing.T, st *store.Store, maxAttempts int) store.Todo {
	t.Helper()
	td, err := st.AddTodo(context.Background(), store.NewTodo{Queue: "inbox", Payload: "{}", MaxAttempts: maxAttempts})
	if err != nil {
		t.Fatal(err)
	}
	return td
}

// claim has agent:w claim todo id, and returns the acknowledgement of its lease.
func claim(t *testing.T, st *store.Store, id int64, ttl time.Duration) store.Ack {
	t.Helper()
	td, err := st.Claim(context.Background(), store.Ack{ID: id, Owner: "agent:w"}, ttl)
	if err != nil {
		t.Fatal(err)
	}
	return store.Ack{ID: id, Owner: "agent:w", LeaseSeq: td.LeaseSeq}
}

func state(t *testing.T, st *store.Store, id int64) store.Todo {
	t.Helper()
	td, err := st.Todo(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return td
}

func TestRunOnceRequeuesAndDeadLettersExpiredLeases(t *testing.T) {
	ctx := context.Background()
	st, clk, r := setup(t)
	retry := add(t, st, 3) // attempts left: requeued
	last := add(t, st, 1)  // last attempt: dead-lettered
	live := add(t, st, 3)  // lease still running: untouched
	claim(t, st, retry.ID, time.Minute)
	claim(t, st, last.ID, time.Minute)
	claim(t, st, live.ID, time.Hour)

	res, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res != (Result{}) {
		t.Fatalf("before expiry a pass did %+v", res)
	}

	clk.Add(time.Minute + time.Second)
	res, err = r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Requeued != 1 || res.DeadLettered != 1 {
		t.Fatalf("pass = %+v, want 1 requeued, 1 dead-lettered", res)
	}
	if got := state(t, st, retry.ID); got.State != store.StatePending || got.Owner != "" || got.Attempts != 1 {
		t.Errorf("requeued todo = %s owner %q attempts %d", got.State, got.Owner, got.Attempts)
	}
	if got := state(t, st, last.ID); got.State != store.StateFailed || got.LastError == "" {
		t.Errorf("dead-lettered todo = %s, last error %q", got.State, got.LastError)
	}
	if got := state(t, st, live.ID); got.State != store.StateClaimed {
		t.Errorf("live lease was reaped: %s", got.State)
	}

	// The requeued todo is claimable again, by anyone.
	next, ok, err := st.ClaimNext(ctx, "agent:other", []string{"inbox"}, time.Minute)
	if err != nil || !ok || next.ID != retry.ID {
		t.Fatalf("claim after requeue = %d %v %v, want todo %d", next.ID, ok, err, retry.ID)
	}
}

func TestRunOncePrunesDoneTodosPastRetention(t *testing.T) {
	ctx := context.Background()
	st, clk, r := setup(t)
	old := add(t, st, 3)
	if _, err := st.Complete(ctx, claim(t, st, old.ID, time.Minute), "ok"); err != nil {
		t.Fatal(err)
	}
	clk.Add(12 * time.Hour)
	recent := add(t, st, 3)
	if _, err := st.Complete(ctx, claim(t, st, recent.ID, time.Minute), "ok"); err != nil {
		t.Fatal(err)
	}
	pending := add(t, st, 3)

	clk.Add(12*time.Hour + time.Second) // old is 24h+1s done, recent 12h+1s
	res, err := r.RunOnce(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.Pruned != 1 {
		t.Fatalf("pruned %d, want 1", res.Pruned)
	}
	if _, err := st.Todo(ctx, old.ID); err == nil {
		t.Error("done todo past retention still there")
	}
	for _, id := range []int64{recent.ID, pending.ID} {
		if _, err := st.Todo(ctx, id); err != nil {
			t.Errorf("todo %d pruned too early: %v", id, err)
		}
	}
}

// A webhook event is kept until EventRetention after it arrived, even once its
// todo is pruned, so a late redelivery is still a duplicate; then it goes.
func TestRunOncePrunesEventsPastEventRetention(t *testing.T) {
	ctx := context.Background()
	st, clk, r := setup(t)
	h, err := st.CreateWebhook(ctx, store.NewWebhook{SourceType: "generic", Queue: "inbox", Secret: "s", CreatedBy: "human:1"})
	if err != nil {
		t.Fatal(err)
	}
	ev, err := st.RecordDelivery(ctx, store.NewDelivery{WebhookID: h.ID, DeliveryID: "d1", TrustMode: "signed", Body: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Complete(ctx, claim(t, st, ev.TodoID, time.Minute), "ok"); err != nil {
		t.Fatal(err)
	}
	// Pruning always keeps the newest todo and event, so a later delivery comes first.
	if _, err := st.RecordDelivery(ctx, store.NewDelivery{WebhookID: h.ID, DeliveryID: "d2", TrustMode: "signed", Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	clk.Add(24*time.Hour + time.Second)
	if res, err := r.RunOnce(ctx); err != nil || res.Pruned != 1 || res.EventsPruned != 0 {
		t.Fatalf("first pass: %+v, %v (the todo goes, its event stays)", res, err)
	}
	clk.Add(24 * time.Hour)
	keeper := New(st, Options{Retention: 24 * time.Hour, EventRetention: 48 * time.Hour, KeepEvents: true, Now: clk.Now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if res, err := keeper.RunOnce(ctx); err != nil || res.EventsPruned != 0 {
		t.Fatalf("KeepEvents pass: %+v, %v (nothing may go)", res, err)
	}
	if res, err := r.RunOnce(ctx); err != nil || res.EventsPruned != 1 {
		t.Fatalf("second pass: %+v, %v (the event is past its retention)", res, err)
	}
	if _, err := st.WebhookEvent(ctx, ev.EventID); err == nil {
		t.Fatal("event past retention still there")
	}
}

func TestRunStopsWithContext(t *testing.T) {
	st, _, _ := setup(t)
	r := New(st, Options{Interval: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- r.Run(ctx) }()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The audit log is kept whole unless an audit retention is set; then rows older
// than it go, oldest first, and the pruning is itself audited.
func TestAuditRetention(t *testing.T) {
	st, clk, whole := setup(t)
	ctx := context.Background()
	for range 2500 { // more than one chunk
		add(t, st, 3)
	}
	clk.Add(3 * 24 * time.Hour)
	recent := add(t, st, 3)
	count := func() (old, kept int) {
		rows, err := st.ListAudit(ctx, store.AuditFilter{Action: "todo.add", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rows {
			if r.At.Before(clk.Now().Add(-24 * time.Hour)) {
				old++
			} else {
				kept++
			}
		}
		return old, kept
	}
	if res, err := whole.RunOnce(ctx); err != nil || res.AuditPruned != 0 {
		t.Fatalf("without an audit retention: %+v, %v", res, err)
	}
	if old, _ := count(); old == 0 {
		t.Fatal("the audit log lost rows with no audit retention set")
	}

	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	pruning := New(st, Options{Retention: 24 * time.Hour, EventRetention: 48 * time.Hour, AuditRetention: 24 * time.Hour,
		Now: clk.Now, Logger: quiet})
	res, err := pruning.RunOnce(ctx)
	if err != nil || res.AuditPruned != 2500 {
		t.Fatalf("with a day's audit retention: %+v, %v; want the 2500 old rows pruned", res, err)
	}
	if old, kept := count(); old != 0 || kept != 1 {
		t.Fatalf("after pruning: %d old rows left, %d recent kept (want 0 and 1)", old, kept)
	}
	if rows, _ := st.ListAudit(ctx, store.AuditFilter{Target: "todo:" + itoa(recent.ID)}); len(rows) == 0 {
		t.Fatal("the recent todo's audit row went")
	}
	if rows, _ := st.ListAudit(ctx, store.AuditFilter{Action: "audit.prune"}); len(rows) != 3 {
		t.Fatalf("%d audit.prune rows, want one per chunk (3)", len(rows))
	}
	if res, err := pruning.RunOnce(ctx); err != nil || res.AuditPruned != 0 {
		t.Fatalf("a second pass: %+v, %v; want nothing more to prune", res, err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A pass rings the doorbells of backoffs that ended, should the store's timer
// be late (here the store's clock is a test's, which its timer does not follow).
func TestRunOnceRingsEndedBackoffs(t *testing.T) {
	st, clk, r := setup(t)
	rung := make(chan store.TodoChange, 16)
	st.OnTodoChange(func(c store.TodoChange) {
		if c.Cause == "backoff_over" {
			select {
			case rung <- c:
			default:
			}
		}
	})
	td := add(t, st, 5)
	if _, err := st.Fail(context.Background(), claim(t, st, td.ID, time.Minute), "transient", true); err != nil {
		t.Fatal(err)
	}
	clk.Add(store.RetryBackoff(1))
	if _, err := r.RunOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-rung:
		if c.ID != td.ID || !c.Claimable {
			t.Fatalf("rang %+v", c)
		}
	default:
		t.Fatal("the pass did not ring the ended backoff")
	}
}

// The charts' history stays bounded: with a sample every minute for more than a
// day, the reaper's passes keep ChartHistory of minutes and no more.
func TestChartHistoryStaysBounded(t *testing.T) {
	ctx := context.Background()
	st, clk, r := setup(t)
	var refused int64
	h, err := st.CreateWebhook(ctx, store.NewWebhook{SourceType: "generic", Queue: "inbox", Secret: "s3cret-s3cret-s3cret", CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	sampler, err := st.NewChartSampler(ctx, store.ChartOptions{Refused: func(int64) int64 { return refused }})
	if err != nil {
		t.Fatal(err)
	}
	add(t, st, 1) // waits on inbox all along: the queue has a row every minute
	const minutes = 30 * 60
	for i := range minutes {
		refused++ // and the webhook one too
		clk.Add(time.Minute)
		if err := sampler.Sample(ctx); err != nil {
			t.Fatal(err)
		}
		if i%10 == 0 {
			if _, err := r.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := r.RunOnce(ctx); err != nil {
		t.Fatal(err)
	}
	keep := int(store.ChartHistory / time.Minute)
	qm, err := st.QueueMinutes(ctx, "inbox", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	wm, err := st.WebhookMinutes(ctx, h.ID, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if len(qm) != keep || len(wm) != keep {
		t.Fatalf("after %d minutes: %d queue and %d webhook minutes kept, want %d", minutes, len(qm), len(wm), keep)
	}
	if oldest := clk.Now().Add(-store.ChartHistory); qm[0].Minute.Before(oldest) || wm[0].Minute.Before(oldest) {
		t.Fatalf("minutes from %s and %s kept, older than %s", qm[0].Minute, wm[0].Minute, oldest)
	}
}

// Among several processes only the one holding the reaper's role reaps: while
// Leads says no, an expired lease stays claimed; a Kick once it leads reaps it
// without waiting an interval.
func TestRunReapsOnlyWhileItLeads(t *testing.T) {
	st, clk, _ := setup(t)
	var leads atomic.Bool
	passes := make(chan struct{}, 16)
	r := New(st, Options{Interval: time.Hour, Now: clk.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Leads: func() bool { passes <- struct{}{}; return leads.Load() }})
	td := add(t, st, 3)
	claim(t, st, td.ID, time.Minute)
	clk.Add(2 * time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	<-passes // the first pass, made at once, was not this process's to make
	r.Kick()
	<-passes // nor the kicked one
	if got := state(t, st, td.ID); got.State != store.StateClaimed {
		t.Fatalf("a process not leading reaped: %s", got.State)
	}
	leads.Store(true)
	r.Kick()
	<-passes
	r.Kick()
	<-passes // the pass after the kick has ended
	if got := state(t, st, td.ID); got.State != store.StatePending {
		t.Fatalf("after leading and a kick: %s, want pending", got.State)
	}
}
