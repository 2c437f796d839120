package server_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
	"github.com/switchboardhq/switchboard/store"
)

// /metrics counts, per queue, the todos coalesced and the deliveries a webhook
// rule filtered out.
func TestMetricsCountFlowControl(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	base, _, _ := servertest.Start(t, server.Config{DB: db})
	ctx := context.Background()
	st, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for range 3 {
		if _, err := st.AddTodo(ctx, store.NewTodo{Queue: "prs", Payload: "{}",
			Options: store.TodoOptions{Key: "octo/repo#1", Coalesce: true}}); err != nil {
			t.Fatal(err)
		}
	}
	wh, err := st.CreateWebhook(ctx, store.NewWebhook{SourceType: "github", Queue: "hooks", Secret: "s3cretsecret",
		CreatedBy: "human:1", Rules: []byte(`{"filter":{"actions":["opened"]}}`)})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"action": "closed"}`)
	h, err := ingest.Sign("github", "s3cretsecret", "d-1", body, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	h.Set("X-GitHub-Event", "pull_request")
	req, _ := http.NewRequest("POST", base+"/webhooks/w/"+wh.Token, bytes.NewReader(body))
	req.Header = h
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("filtered delivery: %v %v", resp, err)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	scraped, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`switchboard_todos_coalesced_total{queue="prs"} 2`,
		`switchboard_deliveries_filtered_total{queue="hooks"} 1`,
		`switchboard_webhook_deliveries_total{outcome="filtered",source="github"} 1`,
	} {
		if !strings.Contains(string(scraped), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
