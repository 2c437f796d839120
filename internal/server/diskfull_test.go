package server_test

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// While the disk is full (the database capped at its size stands in for one),
// producers get 503 with Retry-After and nothing is stored; /readyz and systemd's
// status line say that writes are failing; the log says so once, not once a
// delivery. Once there is room, deliveries are stored again.
func TestServeWhileTheDiskIsFull(t *testing.T) {
	testkit.SQLiteOnly(t, "the page cap that stands in for a full disk is SQLite's")
	var logs testkit.LockedBuffer
	base, srv, _ := servertest.Start(t, server.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	hook, err := srv.Store().CreateWebhook(ctx, store.NewWebhook{SourceType: "generic", Queue: "inbox",
		Secret: "s3cret-s3cret-s3cret", CreatedBy: "human:1"})
	if err != nil {
		t.Fatal(err)
	}
	deliver := func(id string) *http.Response {
		t.Helper()
		body := []byte(`{"padding":"` + strings.Repeat("x", 32<<10) + `"}`)
		return servertest.Deliver(t, base, hook.Token, "generic", "s3cret-s3cret-s3cret", id, body)
	}
	database := func() (int, string) {
		t.Helper()
		code, body := servertest.Readyz(t, base)
		db, _ := body["database"].(string)
		return code, db
	}

	if err := srv.Store().SetMaxPages(ctx, 1); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		resp := deliver("full-" + string(rune('a'+i)))
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
			t.Fatalf("a delivery on a full disk: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
	}
	if code, db := database(); code != http.StatusServiceUnavailable || !strings.Contains(db, "writes failing since") ||
		!strings.Contains(db, "(5 refused)") || !strings.Contains(db, "full") {
		t.Fatalf("/readyz on a full disk: %d %q", code, db)
	}
	if line := srv.StatusLine(ctx); !strings.HasPrefix(line, "WRITES FAILING since ") || !strings.Contains(line, "full") {
		t.Fatalf("status line on a full disk: %q", line)
	}
	if n := strings.Count(logs.String(), "webhook delivery: record"); n != 1 {
		t.Fatalf("%d log lines for 5 refused deliveries:\n%s", n, logs.String())
	}

	if err := srv.Store().SetMaxPages(ctx, 1<<30); err != nil {
		t.Fatal(err)
	}
	if resp := deliver("full-a"); resp.StatusCode != http.StatusAccepted {
		t.Fatalf("the first refused delivery, sent again with room: %d", resp.StatusCode)
	}
	// /readyz and the status line clear 10 s after the last refusal (the store's
	// test shows when); not timed here.
}
