package store

import (
	"context"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

func TestWebhookDeliveryStats(t *testing.T) {
	ctx := context.Background()
	s, clk := openWebSessionStore(t)
	var hooks []Webhook
	for _, q := range []string{"a", "b", "c"} {
		h, err := s.CreateWebhook(ctx, NewWebhook{SourceType: "generic", Queue: q, Secret: "s3cret-s3cret-s3cret", CreatedBy: "test"})
		if err != nil {
			t.Fatal(err)
		}
		hooks = append(hooks, h)
	}
	deliver := func(h Webhook, id string) time.Time {
		clk.Add(time.Minute)
		if _, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: id, TrustMode: "signed", Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		return clk.Now()
	}
	deliver(hooks[0], "1")
	lastA := deliver(hooks[0], "2")
	deliver(hooks[0], "2") // a redelivery stores nothing
	lastB := deliver(hooks[1], "1")

	stats, err := s.WebhookDeliveryStats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[int64]DeliveryStats{hooks[0].ID: {2, lastA}, hooks[1].ID: {1, lastB}}
	if len(stats) != len(want) {
		t.Fatalf("stats %v, want %v", stats, want)
	}
	for id, w := range want {
		if got := stats[id]; got.Deliveries != w.Deliveries || !got.LastDelivery.Equal(w.LastDelivery) {
			t.Errorf("webhook %d: %+v, want %+v", id, got, w)
		}
	}
}

// After a first count, the stats take in new deliveries; a pruning of events, by
// this process or another, is taken in too.
func TestWebhookDeliveryStatsFollowDeliveriesAndPruning(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	other, err := Open(ctx, s.Path(), Options{Now: clock.Now}) // the reaper of another serve, say
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	a := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "human:1"})
	b := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "human:1"})
	deliver := func(h Webhook, id string) DeliveryResult {
		t.Helper()
		clock.Add(time.Second)
		res, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: id, TrustMode: "signed", Body: []byte("body")})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	check := func(what string, want map[int64]DeliveryStats) {
		t.Helper()
		got, err := s.WebhookDeliveryStats(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %+v, want %+v", what, got, want)
		}
		for id, w := range want {
			if g := got[id]; g.Deliveries != w.Deliveries || !g.LastDelivery.Equal(w.LastDelivery) {
				t.Fatalf("%s: webhook %d %+v, want %+v", what, id, g, w)
			}
		}
	}
	first := deliver(a, "1")
	deliver(a, "2")
	check("first count", map[int64]DeliveryStats{a.ID: {2, clock.Now()}})
	deliver(b, "1")
	bLast := clock.Now()
	deliver(a, "3")
	check("after two more", map[int64]DeliveryStats{a.ID: {3, clock.Now()}, b.ID: {1, bLast}})

	// Another process finishes the first delivery's todo and prunes it and its event.
	td, err := other.Claim(ctx, Ack{ID: first.TodoID, Owner: "agent:bot"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Complete(ctx, Ack{ID: first.TodoID, Owner: "agent:bot", LeaseSeq: td.LeaseSeq}, "ok"); err != nil {
		t.Fatal(err)
	}
	aLast := clock.Now()
	clock.Add(time.Hour)
	if n, err := other.PruneDone(ctx, clock.Now()); err != nil || n != 1 {
		t.Fatalf("prune todos: %d, %v", n, err)
	}
	if n, err := other.PruneEvents(ctx, clock.Now()); err != nil || n != 1 {
		t.Fatalf("prune events: %d, %v", n, err)
	}
	check("after the pruning", map[int64]DeliveryStats{a.ID: {2, aLast}, b.ID: {1, bLast}})
	deliver(b, "2")
	check("and a delivery after it", map[int64]DeliveryStats{a.ID: {2, aLast}, b.ID: {2, clock.Now()}})
}
