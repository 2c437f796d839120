package store

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// A write refused for the disk's sake (here the database's page limit, which
// SQLite reports as a full disk) starts a spell of trouble that WriteTrouble
// reports with its first time and count, logged once; a business refusal does not
// count; a commit ends the spell once no write was refused for troubleLinger, not
// before (a small write may fit where a delivery does not), even with nothing
// written after it.
func TestWriteTroubleWhileTheDiskIsFull(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	ctx := context.Background()
	var logs bytes.Buffer
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s, err := Open(ctx, filepath.Join(t.TempDir(), "sb.db"), Options{Now: clock.Now,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "fits"}); err != nil {
		t.Fatal(err)
	}
	if s.WriteTrouble() != nil {
		t.Fatal("trouble before any")
	}
	// A business refusal is not trouble.
	if _, err := s.Retry(ctx, 999, "human:test"); err == nil {
		t.Fatal("retried a missing todo")
	}
	if s.WriteTrouble() != nil {
		t.Fatalf("a missing todo counted as trouble: %v", s.WriteTrouble())
	}

	if err := s.SetMaxPages(ctx, 1); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 64<<10)
	for range 3 {
		if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: big}); err == nil || !diskTrouble(err) {
			t.Fatalf("a write past the page limit: %v", err)
		}
	}
	tr := s.WriteTrouble()
	if tr == nil || tr.Failed != 3 || !strings.Contains(tr.Err, "full") || !tr.Since.Equal(clock.Now()) {
		t.Fatalf("trouble = %+v", tr)
	}
	if n := strings.Count(logs.String(), "writes are failing"); n != 1 {
		t.Fatalf("logged the spell %d times:\n%s", n, logs.String())
	}

	if err := s.SetMaxPages(ctx, 1<<30); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Second)
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: big}); err != nil {
		t.Fatal(err)
	}
	if tr := s.WriteTrouble(); tr == nil {
		t.Fatal("the spell ended at the first commit after a refusal")
	}
	clock.Add(troubleLinger)
	if tr := s.WriteTrouble(); tr != nil {
		t.Fatalf("trouble %v after a commit and %v without a refusal", tr, troubleLinger)
	}
	if !strings.Contains(logs.String(), "writes succeed again") {
		t.Fatalf("the end of the spell was not logged:\n%s", logs.String())
	}
}
