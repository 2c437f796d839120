package server_test

import (
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
	"github.com/switchboardhq/switchboard/store"
)

// /metrics says, per queue, whether it is paused and how many todos await approval.
func TestMetricsQueuePausedAndAwaitingApproval(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	base, _, _ := servertest.Start(t, server.Config{DB: db})
	ctx := context.Background()
	st, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, q := range []string{"deploys", "inbox"} {
		if _, err := st.AddTodo(ctx, store.NewTodo{Queue: q, Payload: "{}"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.PauseQueue(ctx, "deploys", "human:1"); err != nil {
		t.Fatal(err)
	}
	td, ok, err := st.ClaimNext(ctx, "agent:a", []string{"deploys", "inbox"}, time.Minute)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	if _, err := st.RequestApproval(ctx, store.Ack{ID: td.ID, Owner: "agent:a", LeaseSeq: td.LeaseSeq}, "go?"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`switchboard_queue_paused{queue="deploys"} 1`,
		`switchboard_queue_paused{queue="inbox"} 0`,
		`switchboard_queue_awaiting_approval{queue="inbox"} 1`,
		`switchboard_queue_awaiting_approval{queue="deploys"} 0`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
