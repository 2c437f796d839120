package server_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
	"github.com/switchboardhq/switchboard/store"
)

func TestMetricsExposeQueueAndTransitions(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	base, _, _ := servertest.Start(t, server.Config{DB: db})
	// A second handle stands for the CLI; its todos show up in the gauge at scrape.
	// Its clock is two hours slow, so inbox's todo has been claimable that long.
	ctx := context.Background()
	st, err := store.Open(ctx, db, store.Options{Now: func() time.Time { return time.Now().Add(-2 * time.Hour) }})
	if err != nil {
		t.Fatal(err)
	}
	st.AddTodo(ctx, store.NewTodo{Queue: "inbox", Payload: "{}"})
	// On "later" the only pending todo backs off after a failure: nothing is claimable.
	cli, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	td, err := cli.AddTodo(ctx, store.NewTodo{Queue: "later", Payload: "{}"})
	if err == nil {
		td, err = cli.Claim(ctx, store.Ack{ID: td.ID, Owner: "agent:a"}, time.Minute)
	}
	if err == nil {
		_, err = cli.Fail(ctx, store.Ack{ID: td.ID, Owner: "agent:a", LeaseSeq: td.LeaseSeq}, "flaky", true)
	}
	cli.Close()
	if err != nil {
		t.Fatal(err)
	}
	wh, err := st.CreateWebhook(context.Background(), store.NewWebhook{SourceType: "github", Queue: "inbox",
		Secret: "s3cret", CreatedBy: "human:1"})
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	http.Get(base + "/healthz")
	// A method made up by the client is counted as "other", not as a label of its
	// own (each would be a series kept until restart, and in every scrape).
	odd, _ := http.NewRequest("QZZZZZZZZZZZZZ", base+"/healthz", nil)
	if resp, err := http.DefaultClient.Do(odd); err == nil {
		resp.Body.Close()
	}
	// A request line and headers past 64 KiB are refused before any handler.
	big, _ := http.NewRequest("GET", base+"/healthz", nil)
	big.Header.Set("X-Padding", strings.Repeat("x", 70<<10))
	if resp, err := http.DefaultClient.Do(big); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("70 KiB of headers: %v %v, want 431", resp, err)
	}
	// A delivery with a wrong signature is refused and counted.
	req, _ := http.NewRequest("POST", base+"/webhooks/w/"+wh.Token, strings.NewReader(`{"zen":"x"}`))
	req.Header.Set("X-Hub-Signature-256", "sha256=00")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 401 {
		t.Fatalf("bad signature: %v %v", resp, err)
	}

	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("/metrics from loopback: %d", resp.StatusCode)
	}
	for _, want := range []string{
		`switchboard_todos{queue="inbox",state="pending"} 1`,
		`switchboard_http_request_duration_seconds_count{code="200",method="GET",route="/healthz"} 1`,
		`,method="other",route="/healthz"} 1`,
		`switchboard_store_commits_total`,
		`switchboard_store_writer_busy_seconds_total`,
		`switchboard_webhook_deliveries_total{outcome="unauthorized",source="github"} 1`,
		`switchboard_doorbell_drops_total 0`,
		`process_resident_memory_bytes`,
		`switchboard_queue_head_wait_seconds{queue="later"} 0`,
		`switchboard_process_info{host=`,
		`switchboard_reaper_leader 1`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(string(body), "QZZZ") {
		t.Error("/metrics has a label of the client's made-up method")
	}
	_, line, _ := strings.Cut(string(body), `switchboard_queue_head_wait_seconds{queue="inbox"} `)
	line, _, _ = strings.Cut(line, "\n")
	if wait, err := strconv.ParseFloat(line, 64); err != nil || wait < 7190 || wait > 7300 {
		t.Errorf("inbox's head has waited %q seconds, want about 7200", line)
	}
}
