package store

import (
	"bytes"
	"context"
	"database/sql"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// On PostgreSQL a write the server refuses for its own sake (out of disk, here
// raised by a trigger with that code, or a read-only database) starts a spell
// of trouble too, so that /readyz fails while writes do; a business refusal
// does not, and a commit ends it as on SQLite.
func TestWriteTroubleOnPostgres(t *testing.T) {
	db := testkit.PostgresURL(t)
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s, err := Open(ctx, db, Options{Now: clock.Now, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Retry(ctx, 999, "human:test"); err == nil || s.WriteTrouble() != nil {
		t.Fatalf("a missing todo: %v, trouble %v", err, s.WriteTrouble())
	}
	admin, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	for _, code := range []string{"disk_full", "read_only_sql_transaction"} {
		if _, err := admin.Exec(ctx, `CREATE OR REPLACE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
			$$BEGIN RAISE EXCEPTION 'refused' USING ERRCODE = '`+code+`'; END$$;
			CREATE OR REPLACE TRIGGER refuse BEFORE INSERT ON todos FOR EACH ROW EXECUTE FUNCTION refuse()`); err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "x"}); err == nil {
			t.Fatalf("%s: the write went through", code)
		}
		if tr := s.WriteTrouble(); tr == nil || !strings.Contains(tr.Err, "refused") {
			t.Fatalf("%s: trouble = %v", code, tr)
		}
		if _, err := admin.Exec(ctx, `DROP TRIGGER refuse ON todos`); err != nil {
			t.Fatal(err)
		}
		clock.Add(time.Second)
		if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "x"}); err != nil {
			t.Fatal(err)
		}
		clock.Add(troubleLinger)
		if tr := s.WriteTrouble(); tr != nil {
			t.Fatalf("%s: trouble %v after a commit and %v without a refusal", code, tr, troubleLinger)
		}
	}
}

// A database made read-only (ALTER DATABASE … SET default_transaction_read_only,
// for maintenance) gives the sessions opened meanwhile that default for their
// life: made writable again, it still refuses their writes. The writer's session
// here is one such; once a write has been refused as read-only, the writer opens
// a session afresh, and writes go through again without a restart of serve
// (the fleet stayed refused, /readyz 503, until each process was restarted).
func TestWritesRecoverOnceTheDatabaseIsWritableAgain(t *testing.T) {
	db := testkit.PostgresURL(t)
	ctx := context.Background()
	s, err := Open(ctx, db, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.exclusive(ctx, func(c *sql.Conn) error {
		_, err := c.ExecContext(ctx, `SET SESSION default_transaction_read_only = on`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "x"}); pgErrorCode(err) != "25006" {
		t.Fatalf("a write in the read-only session: %v, want SQLSTATE 25006", err)
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "x"}); err != nil {
		t.Fatalf("a write with the database writable: %v", err)
	}
}
