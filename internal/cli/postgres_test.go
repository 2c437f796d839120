package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// The test server trusts loopback, so it takes any password: the URL carries one,
// and no output may show it.
const pgTestPassword = "pw-never-shown"

// pgWithPassword is a fresh schema's URL with pgTestPassword in it.
func pgWithPassword(t *testing.T) string {
	t.Helper()
	u, err := url.Parse(testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), pgTestPassword)
	return u.String()
}

// cliPG runs one command against PostgreSQL and fails the test when it does not
// exit with want, or shows the password.
func cliPG(t *testing.T, want int, stdin string, args ...string) (stdout, stderr string) {
	t.Helper()
	code, stdout, stderr := cli(t, stdin, args...)
	if code != want {
		t.Fatalf("%s: exit %d, want %d: %s%s", strings.Join(args[:2], " "), code, want, stdout, stderr)
	}
	if strings.Contains(stdout+stderr, pgTestPassword) {
		t.Fatalf("%s shows the password: %s%s", strings.Join(args[:2], " "), stdout, stderr)
	}
	return stdout, stderr
}

// Every command that opens the database works with --db postgres://…
func TestCommandsOnPostgres(t *testing.T) {
	db := pgWithPassword(t)
	out, _ := cliPG(t, 0, "", "endpoint", "create", "--db", db, "--agent", "reviewer", "--queues", "inbox",
		"--max-webhooks", "2", "--webhook-sources", "github", "--json")
	var ep struct {
		EndpointID int64 `json:"endpoint_id"`
	}
	if err := json.Unmarshal([]byte(out), &ep); err != nil || ep.EndpointID == 0 {
		t.Fatalf("endpoint create --json: %v\n%s", err, out)
	}
	id := itoa(ep.EndpointID)
	cliPG(t, 0, "", "endpoint", "update", id, "--db", db, "--default-lease", "60")
	if out, _ := cliPG(t, 0, "", "endpoint", "list", "--db", db); !strings.Contains(out, "reviewer") {
		t.Fatalf("endpoint list misses the endpoint:\n%s", out)
	}

	out, _ = cliPG(t, 0, "", "todo", "add", "--db", db, "--queue", "inbox", "--payload", `{"pr":42}`)
	out, _ = cliPG(t, 0, "", "todo", "list", "--db", db, "--queue", "inbox", "--json")
	var todos []struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &todos); err != nil || len(todos) != 1 {
		t.Fatalf("todo list --json: %v\n%s", err, out)
	}
	if out, _ := cliPG(t, 0, "", "todo", "show", itoa(todos[0].ID), "--db", db); !strings.Contains(out, `"pr"`) {
		t.Fatalf("todo show misses the payload:\n%s", out)
	}

	cliPG(t, 0, "", "todo", "retry", "--all-failed", "--queue", "inbox", "--db", db)

	cliPG(t, 0, "a long enough password\n", "operator", "create", "--db", db, "--username", "ana")
	cliPG(t, 0, "another long enough password\n", "operator", "passwd", "--db", db, "--username", "ana")
	cliPG(t, 0, "", "operator", "logout", "--db", db, "--username", "ana")
	if out, _ := cliPG(t, 0, "", "admin", "list", "--db", db); !strings.Contains(out, "ana") {
		t.Fatalf("admin list misses ana:\n%s", out)
	}

	cliPG(t, 0, "", "webhook", "create", "--db", db, "--source", "github", "--queue", "inbox", "--endpoint", id)
	if out, _ := cliPG(t, 0, "", "webhook", "list", "--db", db); !strings.Contains(out, "github") {
		t.Fatalf("webhook list misses the webhook:\n%s", out)
	}
	key := filepath.Join(t.TempDir(), "secret.key")
	if err := os.WriteFile(key, []byte(base64.StdEncoding.EncodeToString(make([]byte, 32))+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, _ := cliPG(t, 0, "", "secrets", "reencrypt", "--db", db, "--secret-key-file", key); !strings.Contains(out, "encrypted 1 ") {
		t.Fatalf("secrets reencrypt: %s", out)
	}
	cliPG(t, 0, "", "webhook", "events", "1", "--db", db)
	cliPG(t, 0, "", "webhook", "delete", "1", "--db", db)
	cliPG(t, 0, "", "modules", "list", "--db", db)
	cliPG(t, 0, "", "endpoint", "revoke", id, "--db", db)
}

// backup and restore are SQLite's; on PostgreSQL they say so and name pg_dump,
// and so does --synchronous.
func TestSQLiteOnlyCommandsOnPostgres(t *testing.T) {
	db := pgWithPassword(t)
	dir := t.TempDir()
	// An archive as pg_dump writes one begins so; restore leaves the rest to pg_restore.
	if err := os.WriteFile(dir+"/b.dump", []byte("PGDMP\x01\x0f"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args       []string
		start, end string // of the command, on a line of its own
	}{
		// libpq takes no search_path in a URL: the test's schema is pg_dump's --schema.
		{[]string{"backup", "--db", db, "--to", dir + "/b.db"}, "pg_dump --format=custom --file=" + dir + "/b.db --schema=t_", ""},
		{[]string{"backup", "--db", db}, "pg_dump --format=custom --file=switchboard.dump --schema=t_", ""},
		{[]string{"restore", "--db", db, "--from", dir + "/b.dump"}, "pg_restore --clean --if-exists --schema=t_", " " + dir + "/b.dump"},
		{[]string{"restore", "--db", db}, "pg_restore --clean --if-exists --schema=t_", " switchboard.dump"},
	} {
		_, stderr := cliPG(t, 1, "", c.args...)
		cmd, _ := store.AdviceCommand(stderr)
		if !strings.Contains(stderr, "SQLite") || !strings.HasPrefix(cmd, c.start) || !strings.HasSuffix(cmd, c.end) ||
			strings.Contains(stderr, "search_path") || strings.Contains(stderr, "xxxxx") ||
			!strings.Contains(stderr, store.PasswordNote) {
			t.Errorf("%q on PostgreSQL: %q, want it to say it is SQLite only, with a command from %q to %q on a line of its own, and no password", c.args, stderr, c.start, c.end)
		}
	}
	_, stderr := cliPG(t, 2, "", "serve", "--db", db, "--synchronous", "NORMAL", "--listen", "127.0.0.1:0")
	if !strings.Contains(stderr, "SQLite only") || !strings.Contains(stderr, "synchronous_commit") {
		t.Errorf("serve --synchronous NORMAL on PostgreSQL: %q", stderr)
	}
}

// serve on PostgreSQL starts, answers /readyz, and prints its banner, next steps
// and log lines with the password masked.
func TestServeOnPostgres(t *testing.T) {
	db := pgWithPassword(t)
	var logs testkit.LockedBuffer
	env := &environ{stdin: strings.NewReader(""), stderr: &logs, getenv: func(string) string { return "" }, arg0: "switchboard"}
	lines, stop := serveFirstLines(env, 3, "serve", "--db", db, "--listen", "127.0.0.1:0") // banner and two hints
	if len(lines) < 3 {
		t.Fatalf("serve exited %d, printed %q; log %s", stop(), lines, logs.String())
	}
	base := strings.TrimPrefix(lines[0], "switchboard listening on ")
	base = base[:strings.Index(base, " ")]
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if code := stop(); code != 0 {
		t.Errorf("serve exited %d: %s", code, logs.String())
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/readyz on PostgreSQL: %d %s", resp.StatusCode, body)
	}
	all := strings.Join(lines, "\n") + string(body) + logs.String()
	// The next steps are to be pasted: the URL without its password (a masked
	// one would not log in), and where the password goes instead.
	if strings.Contains(all, pgTestPassword) || !strings.Contains(lines[1], "operator create") ||
		!strings.Contains(lines[1], "--db 'postgres://postgres@") || strings.Contains(lines[1], "xxxxx") ||
		!strings.Contains(lines[1], "with the password in PGPASSWORD") {
		t.Errorf("serve shows the password, or its next steps cannot be pasted:\n%s", all)
	}
}

// A read command on an empty schema says so, as it says where it looked for a
// file that is not there, rather than calling it a foreign database.
func TestReadCommandOnAnEmptySchema(t *testing.T) {
	db := pgWithPassword(t)
	_, stderr := cliPG(t, 1, "", "todo", "list", "--db", db)
	if !strings.Contains(stderr, "holds no Switchboard tables yet") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("todo list on an empty schema: %q", stderr)
	}
}

// A command that acts on what is there (cancel, rotate, resume, approve,
// revoke, log out) says an empty schema holds no Switchboard tables, and leaves
// it empty, rather than making the tables to find nothing in them: a mistyped
// --db is not filled.
func TestActingCommandsOnAnEmptySchemaMakeNothing(t *testing.T) {
	db := pgWithPassword(t)
	for _, args := range [][]string{
		{"todo", "cancel", "1", "--db", db},
		{"todo", "release", "1", "--db", db},
		{"todo", "retry", "1", "--db", db},
		{"endpoint", "revoke", "1", "--db", db},
		{"webhook", "rotate", "1", "--db", db},
		{"webhook", "delete", "1", "--db", db},
		{"queue", "resume", "inbox", "--db", db},
		{"modules", "approve", "m", "t", "--db", db},
		{"operator", "logout", "--username", "ana", "--db", db},
	} {
		_, stderr := cliPG(t, 1, "", args...)
		if !strings.Contains(stderr, "holds no Switchboard tables yet") {
			t.Errorf("%q on an empty schema: %q", args, stderr)
		}
	}
	conn, err := pgx.Connect(t.Context(), strings.Replace(db, ":"+pgTestPassword+"@", "@", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var tables int
	if err := conn.QueryRow(t.Context(), `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("the schema holds %d tables (%v)", tables, err)
	}
}

// libpq's keyword=value settings select PostgreSQL as a URL does, and the
// password in them is never shown.
func TestKeywordSettingsOnPostgres(t *testing.T) {
	u, err := url.Parse(pgWithPassword(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	t.Chdir(dir)
	kw := "host=" + u.Hostname() + " port=" + u.Port() + " dbname=" + strings.TrimPrefix(u.Path, "/") +
		" user=" + u.User.Username() + " password=" + pgTestPassword +
		" options='-c search_path=" + u.Query().Get("search_path") + "'"
	cliPG(t, 0, "", "todo", "add", "--db", kw, "--queue", "inbox", "--payload", `{"n":1}`)
	out, _ := cliPG(t, 0, "", "todo", "list", "--db", kw, "--json")
	if !strings.Contains(out, `"inbox"`) {
		t.Errorf("todo list on keyword settings: %s", out)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("keyword settings made a file: %v", entries)
	}
}

// A server that cannot be reached, a database that is not there, a role that may
// not create tables: serve says which, in one line, without the password, and
// exits 1.
func TestServeOnPostgresRefusesInOneLine(t *testing.T) {
	db := pgWithPassword(t)
	u, _ := url.Parse(db)
	role := "norights_" + strings.TrimPrefix(u.Query().Get("search_path"), "t_")
	admin, err := pgx.Connect(t.Context(), os.Getenv("SWITCHBOARD_TEST_POSTGRES"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Roles are the server's, not the schema's: this one goes with its grants.
		ctx := context.Background()
		admin.Exec(ctx, "DROP OWNED BY "+role)
		admin.Exec(ctx, "DROP ROLE "+role)
		admin.Close(ctx)
	})
	if _, err := admin.Exec(t.Context(), "CREATE ROLE "+role+" LOGIN"); err != nil {
		t.Fatal(err)
	}

	at := func(edit func(u *url.URL)) string {
		c := *u
		edit(&c)
		return c.String()
	}
	for _, tc := range []struct{ name, db, want string }{
		{"unreachable", at(func(u *url.URL) { u.Host = "127.0.0.1:1" }), "PostgreSQL at 127.0.0.1:1"},
		{"no such database", at(func(u *url.URL) { u.Path = "/no_such_db" }), `database "no_such_db" does not exist`},
		{"no usage", at(func(u *url.URL) { u.User = url.UserPassword(role, pgTestPassword) }), "the role may not use it"},
	} {
		_, stderr := cliPG(t, 1, "", "serve", "--db", tc.db, "--listen", "127.0.0.1:0")
		if !strings.Contains(stderr, tc.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
			t.Errorf("%s: %q, want one line saying %q", tc.name, stderr, tc.want)
		}
	}
	if _, err := admin.Exec(t.Context(), "GRANT USAGE ON SCHEMA "+u.Query().Get("search_path")+" TO "+role); err != nil {
		t.Fatal(err)
	}
	_, stderr := cliPG(t, 1, "", "serve", "--db", at(func(u *url.URL) { u.User = url.UserPassword(role, pgTestPassword) }), "--listen", "127.0.0.1:0")
	if !strings.Contains(stderr, "the role may not create tables") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 {
		t.Errorf("no create: %q, want one line saying the role may not create tables", stderr)
	}
}

// The move to PostgreSQL: restore --from a SQLite database (a backup, or the
// file with serve stopped) copies it into the empty schema --db names, and the
// todos, the agent's endpoint and the webhook are there; a second time it is
// refused, changing nothing.
func TestRestoreCopiesASQLiteDatabaseIn(t *testing.T) {
	db := pgWithPassword(t)
	file := filepath.Join(t.TempDir(), "switchboard.db")
	cli(t, "", "todo", "add", "--queue", "inbox", "--payload", `{"n":1}`, "--db", file)
	cli(t, "", "endpoint", "create", "--agent", "a1", "--queues", "inbox", "--db", file)
	stdout, _ := cliPG(t, 0, "", "restore", "--from", file, "--db", db)
	if !strings.Contains(stdout, "copied "+file+" into ") || !strings.Contains(stdout, "todos 1") || !strings.Contains(stdout, "endpoints 1") {
		t.Errorf("restore of a SQLite database into PostgreSQL said: %s", stdout)
	}
	list, _ := cliPG(t, 0, "", "todo", "list", "--db", db)
	if !strings.Contains(list, "inbox") {
		t.Errorf("todo list after the copy: %s", list)
	}
	_, stderr := cliPG(t, 1, "", "restore", "--from", file, "--db", db)
	if !strings.Contains(stderr, "already holds Switchboard data") {
		t.Errorf("a second copy: %s", stderr)
	}
	_, stderr = cliPG(t, 1, "", "restore", "--from", filepath.Join(t.TempDir(), "nothing.db"), "--db", db)
	if !strings.Contains(stderr, "no file at ") {
		t.Errorf("restore --from a file that is not there: %s", stderr)
	}
}

// restore --from a file pg_restore refuses prints no pg_restore command for it:
// for a plain SQL dump of pg_dump's, psql's; for anything else a refusal with
// pg_restore's reason. Both exit 1, without the password.
func TestRestoreOnPostgresFromNoArchive(t *testing.T) {
	if _, err := exec.LookPath("pg_restore"); err != nil {
		testkit.SkipOrFail(t, "no pg_restore on PATH: restore cannot tell what the file is")
		return
	}
	db := pgWithPassword(t)
	dir := t.TempDir()
	plain, junk := filepath.Join(dir, "x.sql"), filepath.Join(dir, "junk.bin")
	os.WriteFile(plain, []byte("--\n-- PostgreSQL database dump\n--\n\nSET statement_timeout = 0;\n"), 0o600)
	os.WriteFile(junk, []byte("hello\n"), 0o600)
	_, stderr := cliPG(t, 1, "", "restore", "--from", plain, "--db", db)
	cmd, _ := store.AdviceCommand(stderr)
	if !strings.HasPrefix(cmd, "psql --single-transaction --set ON_ERROR_STOP=1 --dbname=") || !strings.HasSuffix(cmd, " -f "+plain) ||
		!strings.Contains(stderr, "plain SQL dump") || strings.Contains(stderr, "pg_restore --") {
		t.Errorf("restore --from a plain SQL dump: %s", stderr)
	}
	_, stderr = cliPG(t, 1, "", "restore", "--from", junk, "--db", db)
	if _, ok := store.AdviceCommand(stderr); ok || !strings.Contains(stderr, junk+" is neither a SQLite database nor a pg_dump archive") ||
		!strings.Contains(stderr, "does not appear to be a valid archive") {
		t.Errorf("restore --from a file of nothing known: %s", stderr)
	}
}
