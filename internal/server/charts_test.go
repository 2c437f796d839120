package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
	"github.com/switchboardhq/switchboard/store"
)

// serve samples the charts from its own todo hooks and its receiver's refusals.
func TestServeSamplesCharts(t *testing.T) {
	base, srv, _ := servertest.Start(t, server.Config{})
	ctx := context.Background()
	h, err := srv.Store().CreateWebhook(ctx, store.NewWebhook{SourceType: "generic", Queue: "hooks", Secret: "s3cret-s3cret-s3cret", CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Post(ingest.URL(base, h.Token), "application/json", strings.NewReader(`{"unsigned":true}`))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("an unsigned delivery: %d", res.StatusCode)
	}
	if _, err := srv.Store().AddTodo(ctx, store.NewTodo{Queue: "inbox", Payload: "{}", CreatedBy: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := srv.Charts().Sample(ctx); err != nil {
		t.Fatal(err)
	}
	since := time.Now().Add(-2 * time.Minute)
	qm, err := srv.Store().QueueMinutes(ctx, "inbox", since)
	if err != nil || len(qm) != 1 || qm[0].Added != 1 || qm[0].Depth != 1 {
		t.Fatalf("inbox minutes %+v (%v), want one with the todo added", qm, err)
	}
	wm, err := srv.Store().WebhookMinutes(ctx, h.ID, since)
	if err != nil || len(wm) != 1 || wm[0].Refusals != 1 || wm[0].Deliveries != 0 {
		t.Fatalf("webhook minutes %+v (%v), want one with the refusal", wm, err)
	}
}
