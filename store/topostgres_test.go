package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// A SQLite database copied into an empty PostgreSQL schema is the same
// Switchboard there: every table holds as many rows, the agent's credential
// and the webhook's URL and secret work, keyed and approved todos keep their
// state, the counts agree, and new ids follow the copied ones.
func TestCopyToPostgresCarriesEverything(t *testing.T) {
	pg := testkit.PostgresURL(t)
	ctx := context.Background()
	key := bytes.Repeat([]byte{7}, SecretKeySize)
	src := filepath.Join(t.TempDir(), "switchboard.db")
	s, err := Open(ctx, src, Options{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	ep, cred, err := s.CreateEndpoint(ctx, "a1", EndpointSpec{Queues: &[]string{"inbox", "prs"}}, "human:cli")
	if err != nil {
		t.Fatal(err)
	}
	hook, err := s.CreateWebhook(ctx, NewWebhook{SourceType: "github", Queue: "prs", Secret: "s3cret", CreatedBy: "human:cli"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOperator(ctx, "alice", "correct horse battery", "human:cli"); err != nil {
		t.Fatal(err)
	}
	ids := addTodos(t, s, "inbox", 3)
	keyed, err := s.AddTodo(ctx, NewTodo{Queue: "prs", Payload: "k1", Options: TodoOptions{Key: "r#1", Coalesce: true}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "prs", Payload: "not UTF-8 \xff", Options: TodoOptions{Key: "r#1", Coalesce: true}}); err != nil {
		t.Fatal(err)
	}
	ack := claimOne(t, s, "agent:a1", []string{"inbox"})
	if _, err := s.Complete(ctx, ack, "done"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CancelTodo(ctx, ids[1], "human:cli"); err != nil {
		t.Fatal(err)
	}
	s.Close()

	report, err := CopyToPostgres(ctx, src, pg, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if !report.Sealed {
		t.Error("the report does not say the webhook secret is sealed")
	}
	from, err := openSnapshot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer from.Close()
	p, err := Open(ctx, pg, Options{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, c := range report.Tables {
		if want := rowCount(t, from, c.Name); c.Rows != want || rowCount(t, p.rdb, c.Name) != want {
			t.Errorf("table %s: copied %d rows, PostgreSQL holds %d, SQLite %d", c.Name, c.Rows, rowCount(t, p.rdb, c.Name), want)
		}
	}
	if len(report.Tables) < 15 {
		t.Errorf("copied %d tables: %+v", len(report.Tables), report.Tables)
	}
	if got, err := p.EndpointByCredential(ctx, cred); err != nil || got.ID != ep.ID {
		t.Errorf("the agent's credential on PostgreSQL: %+v, %v", got, err)
	}
	if got, secrets, err := p.WebhookByToken(ctx, hook.Token); err != nil || got.ID != hook.ID || len(secrets) == 0 || secrets[0] != "s3cret" {
		t.Errorf("the webhook by its URL on PostgreSQL: %+v, %v", got, err)
	}
	cur, err := p.Todo(ctx, keyed.ID)
	if err != nil || cur.Coalesced != 1 || cur.Payload != "not UTF-8 \xff" || cur.Key != "r#1" {
		t.Errorf("the keyed todo on PostgreSQL: %+v, %v", cur, err)
	}
	if cur, err := p.Todo(ctx, ids[1]); err != nil || cur.State != StateFailed {
		t.Errorf("the cancelled todo on PostgreSQL: %+v, %v", cur, err)
	}
	countsAgree(t, p)
	next, err := p.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "new"})
	if err != nil || next.ID != keyed.ID+1 {
		t.Errorf("a todo added after the copy: %+v, %v; want id %d", next, err, keyed.ID+1)
	}
	if _, _, err := p.ClaimNext(ctx, "agent:a1", []string{"inbox"}, time.Minute); err != nil {
		t.Errorf("a claim after the copy: %v", err)
	}

	// The schema now holds data: a second copy is refused and changes nothing.
	if _, err := CopyToPostgres(ctx, src, pg, t.TempDir()); !errors.Is(err, ErrTargetInUse) {
		t.Errorf("a second copy into the same schema: %v, want ErrTargetInUse", err)
	}
	if n := rowCount(t, p.rdb, "todos"); n != rowCount(t, from, "todos")+1 {
		t.Errorf("after a refused copy PostgreSQL holds %d todos", n)
	}
}

// A copy that fails half-way leaves the schema as it was: no table half
// filled. Here the todos' inserts fail (a trigger the test puts on the target),
// after the endpoints were copied.
func TestCopyToPostgresIsAllOrNothing(t *testing.T) {
	pg := testkit.PostgresURL(t)
	ctx := context.Background()
	src, s := sqliteSource(t)
	if _, _, err := s.CreateEndpoint(ctx, "a1", EndpointSpec{Queues: &[]string{"inbox"}}, "human:cli"); err != nil {
		t.Fatal(err)
	}
	addTodos(t, s, "inbox", 2)
	s.Close()
	p, err := Open(ctx, pg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	admin, err := sql.Open("pgx", pg)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	if _, err := admin.Exec(`CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'refused by the test'; END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(`CREATE TRIGGER refuse BEFORE INSERT ON todos FOR EACH ROW EXECUTE FUNCTION refuse()`); err != nil {
		t.Fatal(err)
	}
	if _, err := CopyToPostgres(ctx, src, pg, t.TempDir()); err == nil || !strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("a copy whose todos the target refuses: %v", err)
	}
	for _, table := range []string{"endpoints", "todos", "todo_payloads", "audit"} {
		if n := rowCount(t, p.rdb, table); n != 0 {
			t.Errorf("after a failed copy %s holds %d rows", table, n)
		}
	}
	if _, err := admin.Exec(`DROP TRIGGER refuse ON todos`); err != nil {
		t.Fatal(err)
	}
	// A serve beating on the schema: refused too.
	if err := p.RegisterProcess(ctx, Process{ID: "p1", Host: "h", PID: 1, Version: "v"}); err != nil {
		t.Fatal(err)
	}
	if _, err := CopyToPostgres(ctx, src, pg, t.TempDir()); !errors.Is(err, ErrTargetInUse) {
		t.Errorf("a copy onto a schema a serve beats on: %v, want ErrTargetInUse", err)
	}
}

func rowCount(t *testing.T, db *sql.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := db.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// The restore advice on PostgreSQL says so when a serve runs on the schema:
// pg_restore would replace its tables under it.
func TestRestoreAdviceNamesARunningServe(t *testing.T) {
	pg := testkit.PostgresURL(t)
	ctx := context.Background()
	p, err := Open(ctx, pg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	const running = "A serve runs on this schema now"
	if a := PgDumpAdvice("restore", pg, "").Error(); strings.Contains(a, running) {
		t.Errorf("advice with no serve: %s", a)
	}
	if err := p.RegisterProcess(ctx, Process{ID: "p1", Host: "h", PID: 1, Version: "v"}); err != nil {
		t.Fatal(err)
	}
	if a := PgDumpAdvice("restore", pg, "").Error(); !strings.Contains(a, running) {
		t.Errorf("advice with a serve beating: %s", a)
	}
}

// A todo's payload that is not UTF-8 (or holds a NUL) keeps every byte on
// PostgreSQL (pgPayloadIn; docs/postgres.md: "payloads keep every byte"), and a
// text payload that happens to start like pgBinaryMark reads back as written:
// the copy writes them as the store does (pgPayloadIn), not as text made valid.
func TestCopyToPostgresKeepsPayloadBytes(t *testing.T) {
	pg := testkit.PostgresURL(t)
	ctx := context.Background()
	payloads := []string{"bin \xff\xfe", "nul \x00 here", pgBinaryMark + "aGVsbG8="}

	// On PostgreSQL directly each payload reads back as written.
	direct, err := Open(ctx, pg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range payloads {
		td, err := direct.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: want})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := direct.Todo(ctx, td.ID); err != nil || got.Payload != want {
			t.Fatalf("PostgreSQL directly: payload %q, want %q (%v)", got.Payload, want, err)
		}
	}
	direct.Close()
	target := testkit.PostgresURL(t)

	src, s := sqliteSource(t)
	var ids []int64
	for _, p := range payloads {
		td, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: p})
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := s.Todo(ctx, td.ID); got.Payload != p {
			t.Fatalf("SQLite: payload %q, want %q", got.Payload, p)
		}
		ids = append(ids, td.ID)
	}
	s.Close()
	if _, err := CopyToPostgres(ctx, src, target, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	p, err := Open(ctx, target, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for i, id := range ids {
		if got, err := p.Todo(ctx, id); err != nil || got.Payload != payloads[i] {
			t.Errorf("todo %d after the copy: payload %q, want %q (%v)", id, got.Payload, payloads[i], err)
		}
	}
}

// The copy of a SQLite database a serve holds (LockForServe, as serve takes it)
// is refused, as restore onto it is: whatever that serve commits after the
// snapshot (a webhook delivery it answered 202 to) would be lost when the
// operator moves to PostgreSQL.
func TestCopyToPostgresRefusesAServedSource(t *testing.T) {
	pg := testkit.PostgresURL(t)
	ctx := context.Background()
	src, s := sqliteSource(t)
	defer s.Close()
	unlock, err := LockForServe(src) // what serve holds while it runs
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	addTodos(t, s, "inbox", 1)
	if _, err := CopyToPostgres(ctx, src, pg, t.TempDir()); !errors.Is(err, ErrInUse) {
		t.Errorf("copy of a file a serve holds: %v, want ErrInUse", err)
	}
}

// A webhook's plaintext secret that is not text (a SQLite database from before
// such secrets were refused) would reach PostgreSQL changed, and verify no
// delivery: the copy refuses it, saying what to do, and copies nothing.
func TestCopyToPostgresRefusesASecretItWouldChange(t *testing.T) {
	pg := testkit.PostgresURL(t)
	ctx := context.Background()
	src, s := sqliteSource(t)
	hook, err := s.CreateWebhook(ctx, NewWebhook{SourceType: "github", Queue: "prs", Secret: "abcdefgh", CreatedBy: "human:cli"})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	raw, err := sql.Open("sqlite", src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Exec(`UPDATE webhooks SET signing_secret = CAST(X'616263ff646566' AS TEXT) WHERE id = ?`, hook.ID); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if _, err := CopyToPostgres(ctx, src, pg, t.TempDir()); err == nil || !strings.Contains(err.Error(), "secrets reencrypt") ||
		!strings.Contains(err.Error(), fmt.Sprintf("the row of id %d, column signing_secret", hook.ID)) {
		t.Fatalf("a copy of a secret that is not text: %v", err)
	}
	p, err := Open(ctx, pg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if n := rowCount(t, p.rdb, "webhooks"); n != 0 {
		t.Errorf("after the refused copy PostgreSQL holds %d webhooks", n)
	}
}

// A snapshot a killed copy left (a whole database, secrets and all) is
// removed by the next copy; that of a copy still running is not.
func TestCopyToPostgresSweepsSnapshotsOfKilledCopies(t *testing.T) {
	pg := testkit.PostgresURL(t)
	ctx := context.Background()
	tmp := t.TempDir()
	dead := filepath.Join(tmp, snapshotPrefix+"999999999-1")
	live := filepath.Join(tmp, fmt.Sprintf("%s%d-2", snapshotPrefix, os.Getpid()))
	for _, d := range []string{dead, live} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "snapshot.db"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src, s := sqliteSource(t)
	s.Close()
	if _, err := CopyToPostgres(ctx, src, pg, tmp); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the snapshot of a copy no longer running is still there (%v)", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the snapshot of a copy still running was removed: %v", err)
	}
	if left, _ := filepath.Glob(filepath.Join(tmp, snapshotPrefix+"*")); len(left) != 1 {
		t.Errorf("the copy left %v", left)
	}
}

// sqliteSource opens a SQLite store on a new file, the source of a copy.
func sqliteSource(t *testing.T) (string, *Store) {
	t.Helper()
	src := filepath.Join(t.TempDir(), "switchboard.db")
	s, err := Open(context.Background(), src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return src, s
}
