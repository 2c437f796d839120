package cli

import (
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/store"
)

func TestBackupWhileServingAndRestoreRefusedUntilStopped(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "sb.db")
	_, stop := startServer(t, server.Config{DB: db})
	ctx := context.Background()
	w, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 20; i++ {
		w.AddTodo(ctx, store.NewTodo{Queue: "q", Payload: "before"})
	}
	backup := filepath.Join(dir, "backup.db")
	if code, _, stderr := cli(t, "", "backup", "--db", db, "--to", backup); code != 0 {
		t.Fatalf("backup while serving: %s", stderr)
	}
	w.AddTodo(ctx, store.NewTodo{Queue: "q", Payload: "after"})
	w.Close()

	if code, _, stderr := cli(t, "", "backup", "--db", db, "--to", backup); code == 0 {
		t.Fatal("backup overwrote an existing file")
	} else if !strings.Contains(stderr, "exist") {
		t.Logf("stderr: %s", stderr)
	}
	code, _, stderr := cli(t, "", "restore", "--db", db, "--from", backup)
	if code == 0 || !strings.Contains(stderr, "running serve") {
		t.Fatalf("restore under a running serve: exit %d, %q", code, stderr)
	}
	stop()
	code, stdout, stderr := cli(t, "", "restore", "--db", db, "--from", backup)
	if code != 0 || !strings.Contains(stdout, "restored "+db) {
		t.Fatalf("restore after stop: %q %s", stdout, stderr)
	}
	s := openRO(t, db)
	defer s.Close()
	todos, err := s.ListTodos(ctx, store.TodoFilter{Limit: 100})
	if err != nil || len(todos) != 20 {
		t.Fatalf("restored %d todos (err %v), want the 20 from before the backup", len(todos), err)
	}
	// The database it replaced, with the todo added after the backup, is kept
	// and named.
	kept, _ := filepath.Glob(db + ".before-restore-*")
	if len(kept) != 1 || !strings.Contains(stdout, "the database it replaced is kept as "+kept[0]) {
		t.Fatalf("kept %v; restore said %q", kept, stdout)
	}
	old := openRO(t, kept[0])
	defer old.Close()
	if todos, err := old.ListTodos(ctx, store.TodoFilter{Limit: 100}); err != nil || len(todos) != 21 {
		t.Fatalf("the kept database holds %d todos (err %v), want 21", len(todos), err)
	}
}

func TestSecondServeOnTheSameDatabaseIsRefused(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	startServer(t, server.Config{DB: db})
	code, _, stderr := cli(t, "", "serve", "--db", db, "--listen", "127.0.0.1:0")
	if code == 0 || !strings.Contains(stderr, "another switchboard serve") {
		t.Fatalf("second serve: exit %d, %q", code, stderr)
	}
}

// A read-only command pointed at no database says where it looked and how to name
// the right one, instead of a bare "no such file".
func TestReadCommandsNameTheMissingDatabase(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nowhere.db")
	for _, args := range [][]string{{"backup", "--to", missing + ".bak"}, {"todo", "list"}, {"webhook", "list"}} {
		code, _, stderr := cli(t, "", append(args, "--db", missing)...)
		if code != 1 || !strings.Contains(stderr, "no database at "+missing) || !strings.Contains(stderr, "--db or SWITCHBOARD_DB") {
			t.Errorf("%v: exit %d %q", args, code, stderr)
		}
	}
}

// modules approve pointed at no database says so instead of creating an empty one.
func TestModulesApproveNeedsTheDatabase(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nowhere.db")
	code, _, stderr := cli(t, "", "modules", "approve", "everything", "echo", "--db", missing)
	if code != 1 || !strings.Contains(stderr, "no database at "+missing) {
		t.Fatalf("exit %d %q", code, stderr)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Fatal("modules approve created the database")
	}
}

// modules list with no serve answering and no database still shows the manifests
// (the missing-database error keeps meaning "does not exist").
func TestModulesListWithoutADatabase(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nowhere.db")
	code, _, stderr := cli(t, "", "modules", "list", "--db", missing, "--url", "http://127.0.0.1:1")
	if code != 0 || !strings.Contains(stderr, "no database at "+missing) {
		t.Fatalf("exit %d %q; want it to say where it looked", code, stderr)
	}
}

// serve on a port another program holds says so and how to choose another, and
// has created no database by then.
func TestServeOnATakenPort(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	db := filepath.Join(t.TempDir(), "sb.db")
	code, _, stderr := cli(t, "", "serve", "--db", db, "--listen", ln.Addr().String())
	if code != 1 || !strings.Contains(stderr, "another program (another serve?) listens there") || !strings.Contains(stderr, "--listen") {
		t.Fatalf("serve on a taken port: exit %d, %q", code, stderr)
	}
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("serve on a taken port made %s (%v)", db, err)
	}
}

// A new installation's serve says what it still lacks to be of use, and stops
// saying it once there is an operator and an endpoint.
func TestFirstRunHints(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	st := openRW(t, db)
	ctx := t.Context()
	hints, err := firstRunHints(ctx, st, "switchboard")
	if err != nil || len(hints) != 2 || !strings.Contains(hints[0], "switchboard operator create --username NAME --db "+db) ||
		!strings.Contains(hints[1], "switchboard endpoint create --agent NAME --queues QUEUE --db "+db) {
		t.Fatalf("hints on a new database: %q, %v", hints, err)
	}
	if _, err := st.CreateOperator(ctx, "ana", "correct horse", "test"); err != nil {
		t.Fatal(err)
	}
	q := []string{"inbox"}
	if _, _, err := st.CreateEndpoint(ctx, "bot", store.EndpointSpec{Queues: &q}, "test"); err != nil {
		t.Fatal(err)
	}
	if hints, err := firstRunHints(ctx, st, "switchboard"); err != nil || len(hints) != 0 {
		t.Fatalf("hints once set up: %q, %v", hints, err)
	}
}

// Upgrading: a CLI command that writes does not migrate a database an older serve
// still runs on (that serve would not start again); backup copies the database as
// it is, the way back; with no serve, the command migrates and says so.
func TestCLIMigratesOnlyWithoutAServe(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	if code, _, stderr := cli(t, "", "todo", "add", "--queue", "inbox", "--db", db, "--payload", "{}"); code != 0 {
		t.Fatal(stderr)
	}
	// As an older Switchboard left it: the newest migration undone.
	raw, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{`DELETE FROM schema_migrations WHERE version = 11`,
		`ALTER TABLE tool_pins DROP COLUMN definition`, `ALTER TABLE tool_pins DROP COLUMN pending_definition`} {
		if _, err := raw.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	raw.Close()

	unlock, err := store.LockForServe(db) // the older serve
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cli(t, "", "todo", "add", "--queue", "inbox", "--db", db, "--payload", "{}")
	if code != 1 || !strings.Contains(stderr, "a running serve uses it") || !strings.Contains(stderr, "Restart serve with this Switchboard") {
		t.Fatalf("todo add under an older serve: exit %d %q", code, stderr)
	}
	if code, out, stderr := cli(t, "", "backup", "--db", db, "--to", db+".bak"); code != 0 || !strings.Contains(out, "backed up") {
		t.Fatalf("backup of the older schema: exit %d %q", code, stderr)
	}
	unlock()
	code, _, stderr = cli(t, "", "todo", "add", "--queue", "inbox", "--db", db, "--payload", "{}")
	if code != 0 || !strings.Contains(stderr, "to this Switchboard's schema (0011_tool_definitions.sql)") {
		t.Fatalf("todo add with no serve: exit %d %q", code, stderr)
	}
	// The backup is the older schema still: the new binary migrates it on restore's next open.
	if code, _, stderr := cli(t, "", "todo", "list", "--db", db+".bak"); code != 1 || !strings.Contains(stderr, "lacks migration 0011") {
		t.Fatalf("the backup was migrated: exit %d %q", code, stderr)
	}
}

// A real command's error reads once: the command, then the reason, with what
// the user named as they named it. A backup onto a file called "store" used to
// lose the file's name to the surgery that undid doubled wrapping.
func TestCLIErrorsReadOnce(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	db := filepath.Join(dir, "sb.db")
	if code, _, errs := cli(t, "", "todo", "add", "--queue", "inbox", "--payload", "hello", "--db", db); code != 0 {
		t.Fatalf("todo add: %d %s", code, errs)
	}
	if err := os.WriteFile(filepath.Join(dir, "store"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"backup", "--to", "store", "--db", db}, "switchboard backup: store: file already exists\n"},
		{[]string{"todo", "show", "999", "--db", db}, "switchboard todo: todo 999: not found\n"},
		{[]string{"operator", "logout", "--username", "store", "--db", db}, "switchboard operator: operator \"store\": not found\n"},
	} {
		if code, _, errs := cli(t, "", c.args...); code != 1 || errs != c.want {
			t.Errorf("%v: exit %d %q, want exit 1 %q", c.args, code, errs, c.want)
		}
	}
}
