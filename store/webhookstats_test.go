package store

import (
	"context"
	"testing"
	"time"
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
		clk.add(time.Minute)
		if _, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: id, TrustMode: "signed", Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
		return clk.now()
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
