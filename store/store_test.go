package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"golang.org/x/crypto/bcrypt"
	"modernc.org/sqlite"
)

// openTest opens a fresh store in a temp dir.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.PasswordCost == 0 {
		opts.PasswordCost = bcrypt.MinCost // checks in milliseconds, under the race detector too
	}
	s, err := Open(context.Background(), testkit.DB(t), opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestMigrationsFreshAndReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sb.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "hello"}); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	list, _ := migrations()
	if n != len(list) {
		t.Fatalf("recorded %d migrations, want %d", n, len(list))
	}
	var mode string
	s.rdb.QueryRow(`PRAGMA journal_mode`).Scan(&mode)
	if mode != "wal" {
		t.Fatalf("journal_mode = %q, want wal", mode)
	}
	s.Close()

	// Re-open: nothing applied twice, data kept.
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	todos, err := s.ListTodos(ctx, TodoFilter{})
	if err != nil || len(todos) != 1 {
		t.Fatalf("after reopen: %d todos, err %v", len(todos), err)
	}
	if err := s.rdb.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil || n != len(list) {
		t.Fatalf("after reopen: %d migrations recorded, err %v", n, err)
	}
}

func TestPragmasOnEveryConnection(t *testing.T) {
	testkit.SQLiteOnly(t, "SQLite pragmas")
	s := openTest(t, Options{ReadConns: 3})
	ctx := context.Background()
	// Hold several read connections at once so the pool must open distinct ones.
	var conns []*sql.Conn
	for i := 0; i < 3; i++ {
		c, err := s.rdb.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		var busy, fk, qo int
		c.QueryRowContext(ctx, `PRAGMA busy_timeout`).Scan(&busy)
		c.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk)
		c.QueryRowContext(ctx, `PRAGMA query_only`).Scan(&qo)
		if busy != 5000 || fk != 1 || qo != 1 {
			t.Errorf("read conn %d: busy_timeout=%d foreign_keys=%d query_only=%d", i, busy, fk, qo)
		}
		c.Close()
	}
	// FULL: the writer's connection commits as NORMAL and the writer syncs the WAL
	// itself before answering (walsync_test.go shows it waits).
	var sync int
	s.writer.conn.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync)
	if sync != 1 || s.writer.wal == nil {
		t.Errorf("writer synchronous = %d, own WAL sync %v; want 1 (NORMAL) and its own sync", sync, s.writer.wal != nil)
	}
	// Every other connection that writes the file (migrations at Open, the floor)
	// opens from the write DSN, and a connection opened from it runs FULL.
	other, err := sql.Open("sqlite", dsn(s.path, s.opts, false))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.QueryRowContext(ctx, `PRAGMA synchronous`).Scan(&sync); err != nil || sync != 2 {
		t.Errorf("a connection from the write DSN: synchronous = %d (%v); want 2 (FULL)", sync, err)
	}
}

func TestSynchronousNormal(t *testing.T) {
	testkit.SQLiteOnly(t, "SQLite synchronous modes")
	s := openTest(t, Options{Synchronous: "normal"})
	var sync int
	s.writer.conn.QueryRowContext(context.Background(), `PRAGMA synchronous`).Scan(&sync)
	if sync != 1 || s.writer.wal != nil {
		t.Fatalf("synchronous = %d, own WAL sync %v; want 1 (NORMAL) and SQLite's own syncs", sync, s.writer.wal != nil)
	}
	if _, err := Open(context.Background(), filepath.Join(t.TempDir(), "x.db"), Options{Synchronous: "OFF"}); err == nil {
		t.Fatal("synchronous OFF was accepted")
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sb.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// Two unknown migrations: the refusal names the newest, not either at random.
	if _, err := s.writer.conn.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at)
		VALUES (9998, '9998_future.sql', 0), (9999, '9999_future.sql', 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	before := fileSum(t, path)
	_, err = Open(ctx, path, Options{})
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("open newer schema: err = %v, want ErrSchemaTooNew", err)
	}
	if !strings.Contains(err.Error(), "migration 9999") || !strings.Contains(err.Error(), "restore a backup made before the upgrade") {
		t.Errorf("error does not name the newest version and the way back: %v", err)
	}
	if fileSum(t, path) != before {
		t.Fatal("refused database was modified")
	}
}

func TestRefusesForeignFiles(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(text, []byte("this is not a database, it is a shopping list\n"), 0o600)

	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE recipes (id INTEGER PRIMARY KEY, name TEXT)`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	for _, path := range []string{text, other} {
		before := fileSum(t, path)
		_, err := Open(ctx, path, Options{})
		if !errors.Is(err, ErrNotSwitchboard) {
			t.Errorf("open %s: err = %v, want ErrNotSwitchboard", filepath.Base(path), err)
		}
		if fileSum(t, path) != before {
			t.Errorf("%s was modified by a refused open", filepath.Base(path))
		}
		if _, err := os.Stat(path + "-wal"); err == nil {
			t.Errorf("%s: a -wal file appeared", filepath.Base(path))
		}
	}

	if _, err := Open(ctx, filepath.Join(dir, "missing-dir", "sb.db"), Options{}); err == nil {
		t.Error("open in a missing directory succeeded")
	}
}

func fileSum(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCredentialHashing(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	q := []string{"inbox"}
	ep, cred, err := s.CreateEndpoint(ctx, "reviewer", EndpointSpec{Queues: &q}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(cred, CredentialPrefix) || len(cred) < 40 {
		t.Fatalf("credential %q lacks the prefix or entropy", cred)
	}
	// Only the hash is stored: the credential appears in no column.
	var hash []byte
	var hint string
	if err := s.rdb.QueryRow(s.q(`SELECT credential_hash, credential_hint FROM endpoints WHERE id = ?`), ep.ID).Scan(&hash, &hint); err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(hash, []byte(cred)) || strings.Contains(hint, cred) {
		t.Fatal("the credential is stored in clear")
	}
	got, err := s.EndpointByCredential(ctx, cred)
	if err != nil || got.ID != ep.ID {
		t.Fatalf("lookup by credential: %v, %v", got.ID, err)
	}
	if _, err := s.EndpointByCredential(ctx, cred+"x"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("wrong credential: err = %v", err)
	}
	// A second endpoint gets a different credential.
	_, cred2, err := s.CreateEndpoint(ctx, "reviewer", EndpointSpec{Queues: &q}, "human:1")
	if err != nil || cred2 == cred {
		t.Fatalf("second credential %q (err %v) repeats the first", cred2, err)
	}
	if err := s.RevokeEndpoint(ctx, ep.ID, "human:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EndpointByCredential(ctx, cred); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoked credential still resolves: %v", err)
	}
	if err := s.RevokeEndpoint(ctx, ep.ID, "human:1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second revoke: err = %v, want ErrNotFound", err)
	}
	audit, _ := s.ListAudit(ctx, AuditFilter{Target: endpointTarget(ep.ID)})
	if len(audit) != 2 {
		t.Fatalf("audit rows for endpoint: %d, want create and revoke", len(audit))
	}
}

func TestOperators(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	if _, err := s.CreateOperator(ctx, "ana", "short", "system"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("short password: %v", err)
	}
	for _, name := range []string{"", "a\x00b", "a\xffb", "a\tb", "a\ufffdb", strings.Repeat("a", 65)} {
		if _, err := s.CreateOperator(ctx, name, "correct horse battery", "system"); !errors.Is(err, ErrInvalid) {
			t.Errorf("username %q: %v, want ErrInvalid", name, err)
		}
	}
	h, err := s.CreateOperator(ctx, "ana", "correct horse battery", "system")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOperator(ctx, "ana", "another password", "system"); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("duplicate username: %v", err)
	}
	var hash string
	s.rdb.QueryRow(s.q(`SELECT password_hash FROM humans WHERE id = ?`), h.ID).Scan(&hash)
	if !strings.HasPrefix(hash, "$2") || strings.Contains(hash, "horse") {
		t.Fatalf("password not stored as a bcrypt hash: %q", hash)
	}
	if got, err := s.CheckPassword(ctx, "ana", "correct horse battery"); err != nil || got.ID != h.ID {
		t.Fatalf("right password: %v", err)
	}
	for _, c := range [][2]string{{"ana", "wrong horse battery"}, {"bob", "correct horse battery"}} {
		if _, err := s.CheckPassword(ctx, c[0], c[1]); !errors.Is(err, ErrBadPassword) {
			t.Errorf("CheckPassword(%s): %v", c[0], err)
		}
	}
}

func TestOnTodoChangeFiresAfterCommit(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	var mu sync.Mutex
	var got []TodoChange
	s.OnTodoChange(func(c TodoChange) {
		// The change must already be visible to readers when the hook runs.
		if _, err := s.Todo(ctx, c.ID); err != nil {
			t.Errorf("hook ran before the commit was visible: %v", err)
		}
		mu.Lock()
		got = append(got, c)
		mu.Unlock()
	})
	td, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "bad queue!", Payload: "{}"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad queue name: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0].ID != td.ID || !got[0].Claimable || got[0].Queue != "inbox" {
		t.Fatalf("hook saw %+v", got)
	}
}

func TestWatchForeignRingsForOtherProcessCommits(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := testkit.DB(t)
	serveSide, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer serveSide.Close()
	rang := make(chan TodoChange, 10)
	serveSide.OnTodoChange(func(c TodoChange) { rang <- c })
	own, _ := serveSide.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "own"})
	<-rang // its own add rang directly

	foreignCommit := make(chan struct{}, 1)
	serveSide.OnForeignCommit(func() {
		select {
		case foreignCommit <- struct{}{}:
		default:
		}
	})
	done := make(chan struct{})
	go func() { serveSide.WatchForeign(ctx, 5*time.Millisecond); close(done) }()

	// A second handle on the same file stands for `switchboard todo add`.
	cli, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The watcher takes what is in the file when it starts as announced: pin
	// tools from the CLI until it reports a foreign commit, so that it is surely
	// watching before the todo is added.
	for i := 0; ; i++ {
		if err := cli.PinTool(ctx, "probe", fmt.Sprintf("t%d", i), "hash", nil); err != nil {
			t.Fatal(err)
		}
		select {
		case <-foreignCommit:
		case <-time.After(50 * time.Millisecond):
			if i == 200 {
				t.Fatal("the watcher never reported a foreign commit")
			}
			continue
		}
		break
	}
	foreign, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "from the CLI"})
	cli.Close()
	if err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-rang:
		if c.ID != foreign.ID || !c.Claimable {
			t.Fatalf("rang for %+v, want todo %d (own todo was %d)", c, foreign.ID, own.ID)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no ring for a todo added by another process")
	}
	cancel()
	<-done
}

func TestMaintainCheckpointsTheWAL(t *testing.T) {
	testkit.SQLiteOnly(t, "SQLite's WAL")
	s := openTest(t, Options{})
	ctx := context.Background()
	for i := 0; i < 50; i++ {
		if _, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: strings.Repeat("x", 3000)}); err != nil {
			t.Fatal(err)
		}
	}
	size := func() int64 {
		fi, err := os.Stat(s.Path())
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	// 150 KB of rows is below the automatic checkpoint threshold: it sits in the WAL
	// until Maintain copies it into the database file.
	before := size()
	if err := s.Maintain(ctx); err != nil {
		t.Fatal(err)
	}
	if after := size(); after < before+100<<10 {
		t.Fatalf("database file %d bytes before Maintain, %d after: the WAL was not checkpointed", before, after)
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "q", Payload: "after"}); err != nil {
		t.Fatal(err)
	}
}

// The store commits with fdatasync where the platform has it, as native SQLite
// builds on Linux do.
func TestOpenSyncsWithFdatasync(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("fdatasync is switched on only where SQLite can use it; checked on Linux")
	}
	sqlite.Fdatasync(false) // the switch is process-wide: start from fsync
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "sb.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if !sqlite.FdatasyncEnabled() {
		t.Fatal("commits still use fsync")
	}
}

// A reader that held one snapshot while the writer went on (a backup to a slow
// disk) let the WAL grow past what the autocheckpoint allows; once it is gone, the
// WAL is cut back to journal_size_limit instead of keeping its size for good.
func TestTheWALShrinksAfterALongReader(t *testing.T) {
	testkit.SQLiteOnly(t, "SQLite's WAL")
	s := openTest(t, Options{Synchronous: SyncNormal})
	ctx := context.Background()
	walSize := func() int64 {
		t.Helper()
		fi, err := os.Stat(s.path + "-wal")
		if err != nil {
			t.Fatal(err)
		}
		return fi.Size()
	}
	reader, err := s.rdb.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.ExecContext(ctx, `BEGIN`); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := reader.QueryRowContext(ctx, `SELECT count(*) FROM todos`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 1<<20)
	for range 24 {
		if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: big}); err != nil {
			t.Fatal(err)
		}
	}
	if size := walSize(); size <= 16<<20 {
		t.Fatalf("the WAL reached only %d bytes behind the reader", size)
	}
	reader.ExecContext(ctx, `COMMIT`)
	reader.Close()
	// One commit checkpoints the WAL (the reader is gone), the next starts it over.
	for range 2 {
		if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "small"}); err != nil {
			t.Fatal(err)
		}
	}
	if size := walSize(); size > 16<<20 {
		t.Fatalf("the WAL kept %d bytes after the reader left", size)
	}
}

// A new database, its WAL and shared memory are readable by their owner alone,
// whatever the umask: they hold ingest tokens and, without a key, webhook secrets.
func TestNewDatabaseIsOwnersAlone(t *testing.T) {
	old := syscall.Umask(0o022)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "sb.db")
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.AddTodo(context.Background(), NewTodo{Queue: "inbox", Payload: "{}"}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if mode := fi.Mode().Perm(); mode != 0o600 {
			t.Errorf("%s: mode %o, want 600", filepath.Base(f), mode)
		}
	}
}

// olderSchema makes path's database look as an older Switchboard left it: the
// newest migration undone and unrecorded.
func olderSchema(t *testing.T, path string) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{`DELETE FROM schema_migrations WHERE version = 11`,
		`ALTER TABLE tool_pins DROP COLUMN definition`, `ALTER TABLE tool_pins DROP COLUMN pending_definition`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// A writer that is not serve (the CLI) migrates only while no serve holds the
// database: a serve still running with migrations pending is an older
// Switchboard, which would not start again on the migrated file.
func TestMigrateUnservedOnly(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sb.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Migrated()) != 0 {
		t.Fatalf("a new database reports migrations: %v", s.Migrated())
	}
	s.Close()
	olderSchema(t, path)

	unlock, err := LockForServe(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, path, Options{MigrateUnservedOnly: true})
	if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), "0011_tool_definitions.sql") {
		t.Fatalf("migrating under a serve: %v, want ErrInUse naming the migration", err)
	}
	// Backup reads it as it is, the way back to the older Switchboard.
	ro, err := Open(ctx, path, Options{ReadOnly: true, OlderSchema: true})
	if err != nil {
		t.Fatalf("read-only open of the older schema for a backup: %v", err)
	}
	if err := ro.Backup(ctx, path+".bak"); err != nil {
		t.Fatal(err)
	}
	ro.Close()
	if _, err := Open(ctx, path, Options{ReadOnly: true}); err == nil || !strings.Contains(err.Error(), "lacks migration 0011") {
		t.Fatalf("a read-only open of the older schema for reading rows: %v", err)
	}
	unlock()

	s, err = Open(ctx, path, Options{MigrateUnservedOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if m := s.Migrated(); len(m) != 1 || m[0] != "0011_tool_definitions.sql" {
		t.Fatalf("Migrated() = %v, want 0011 alone", m)
	}
	// The lock was given back: a serve can start.
	unlock, err = LockForServe(path)
	if err != nil {
		t.Fatalf("the migration kept the serve lock: %v", err)
	}
	unlock()
}
