package store

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// refusalCounter stands in for the ingest receiver's count of refused deliveries.
type refusalCounter struct {
	mu sync.Mutex
	n  map[int64]int64
}

func (r *refusalCounter) add(id, n int64) { r.mu.Lock(); r.n[id] += n; r.mu.Unlock() }
func (r *refusalCounter) Refused(id int64) int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[id]
}

// The sampler files each minute's adds, completions and failed attempts per queue,
// the depth and head wait at its end, and each webhook's deliveries and refusals.
func TestChartSamplerRecordsMinutes(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now, Synchronous: SyncNormal})
	hook := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "hooks", Secret: "x", CreatedBy: "human:1"})
	quiet := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "hooks", Secret: "x", CreatedBy: "human:1"})
	// A delivery before the sampler starts is not this minute's.
	if _, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: hook.ID, DeliveryID: "old", TrustMode: "signed", Body: []byte("{}")}); err != nil {
		t.Fatal(err)
	}
	refusals := &refusalCounter{n: map[int64]int64{hook.ID: 3}}
	c, err := s.NewChartSampler(ctx, ChartOptions{Refused: refusals.Refused})
	if err != nil {
		t.Fatal(err)
	}
	clock.Add(10 * time.Second)
	var inbox []Todo
	for range 4 {
		td, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "{}", CreatedBy: "test"})
		if err != nil {
			t.Fatal(err)
		}
		inbox = append(inbox, td)
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "ops", Payload: "{}", CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	for i, how := range []string{"complete", "retry", "dead-letter"} {
		a := Ack{ID: inbox[i].ID, Owner: "agent:w"}
		claimed, cerr := s.Claim(ctx, a, time.Minute)
		if cerr != nil {
			t.Fatal(cerr)
		}
		a.LeaseSeq = claimed.LeaseSeq
		switch how {
		case "complete":
			_, err = s.Complete(ctx, a, "ok")
		default:
			_, err = s.Fail(ctx, a, "boom", how == "retry")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"a", "b"} {
		if _, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: hook.ID, DeliveryID: id, TrustMode: "signed", Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	refusals.add(hook.ID, 5) // the receiver counts from its start, 3 before the sampler's
	clock.Add(50 * time.Second)
	if err := c.Sample(ctx); err != nil {
		t.Fatal(err)
	}

	// The next minute: nothing moves but refusals; the head waits on.
	refusals.add(hook.ID, 2)
	clock.Add(time.Minute)
	if err := c.Sample(ctx); err != nil {
		t.Fatal(err)
	}

	noon := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	// inbox: 4 added, 1 completed, 2 failed attempts; pending: the untouched one and
	// the retried one, the head, claimable since its backoff ended at 12:00:15.
	checkQueueMinutes(t, s, "inbox", noon, []QueueMinute{
		{Minute: noon, Added: 4, Completed: 1, Failed: 2, Depth: 2, OldestWait: 45 * time.Second},
		{Minute: noon.Add(time.Minute), Depth: 2, OldestWait: 105 * time.Second},
	})
	// hooks: the two deliveries' todos (the one before the sampler started is not
	// counted as added, but waits).
	checkQueueMinutes(t, s, "", noon, []QueueMinute{
		{Minute: noon, Added: 4 + 1 + 2, Completed: 1, Failed: 2, Depth: 2 + 1 + 3, OldestWait: 60 * time.Second},
		{Minute: noon.Add(time.Minute), Depth: 6, OldestWait: 120 * time.Second},
	})
	got, err := s.WebhookMinutes(ctx, hook.ID, noon)
	if err != nil {
		t.Fatal(err)
	}
	want := []WebhookMinute{{Minute: noon, Deliveries: 2, Refusals: 5}, {Minute: noon.Add(time.Minute), Refusals: 2}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("webhook minutes %+v, want %+v", got, want)
	}
	if got, err := s.WebhookMinutes(ctx, quiet.ID, noon); err != nil || len(got) != 0 {
		t.Fatalf("a webhook with nothing has minutes %+v (%v)", got, err)
	}
}

func checkQueueMinutes(t *testing.T, s *Store, queue string, since time.Time, want []QueueMinute) {
	t.Helper()
	got, err := s.QueueMinutes(context.Background(), queue, since)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("queue %q minutes %+v, want %+v", queue, got, want)
	}
	for i := range want {
		if !got[i].Minute.Equal(want[i].Minute) || got[i].Added != want[i].Added || got[i].Completed != want[i].Completed ||
			got[i].Failed != want[i].Failed || got[i].Depth != want[i].Depth || got[i].OldestWait != want[i].OldestWait {
			t.Errorf("queue %q minute %d: %+v, want %+v", queue, i, got[i], want[i])
		}
	}
}

// Two samples in one minute (a restart, a late timer) add up in its row; the depth
// is the latest.
func TestChartSamplerSameMinuteAddsUp(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 1, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now, Synchronous: SyncNormal})
	c, err := s.NewChartSampler(ctx, ChartOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "{}", CreatedBy: "test"}); err != nil {
			t.Fatal(err)
		}
		clock.Add(20 * time.Second)
		if err := c.Sample(ctx); err != nil {
			t.Fatal(err)
		}
	}
	noon := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	checkQueueMinutes(t, s, "inbox", noon, []QueueMinute{{Minute: noon, Added: 2, Depth: 2, OldestWait: 40 * time.Second}})
}

// PruneCharts deletes the minutes before its cutoff, of queues and webhooks.
func TestPruneCharts(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now, Synchronous: SyncNormal})
	hook := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "hooks", Secret: "x", CreatedBy: "human:1"})
	refusals := &refusalCounter{n: map[int64]int64{}}
	c, err := s.NewChartSampler(ctx, ChartOptions{Refused: refusals.Refused})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "{}", CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	for range 10 {
		refusals.add(hook.ID, 1)
		clock.Add(time.Minute)
		if err := c.Sample(ctx); err != nil {
			t.Fatal(err)
		}
	}
	cutoff := clock.Now().Add(-4 * time.Minute) // keeps 12:06 to 12:09
	n, err := s.PruneCharts(ctx, cutoff)
	if err != nil || n != 2*6 {
		t.Fatalf("pruned %d rows (%v), want 12", n, err)
	}
	qm, err := s.QueueMinutes(ctx, "inbox", time.Time{})
	if err != nil || len(qm) != 4 || !qm[0].Minute.Equal(cutoff) {
		t.Fatalf("queue minutes left %+v (%v), want 4 from %s", qm, err, cutoff)
	}
	wm, err := s.WebhookMinutes(ctx, hook.ID, time.Time{})
	if err != nil || len(wm) != 4 || !wm[0].Minute.Equal(cutoff) {
		t.Fatalf("webhook minutes left %+v (%v), want 4 from %s", wm, err, cutoff)
	}
}
