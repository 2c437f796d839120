package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
	"github.com/switchboardhq/switchboard/store"
)

// cli runs one command in-process and returns its exit code and output.
func cli(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	env := &environ{stdin: strings.NewReader(stdin), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code = run(context.Background(), env, args)
	return code, out.String(), errb.String()
}

func TestUsageErrorsExitTwo(t *testing.T) {
	// A command that ignored --db would create ./switchboard.db here, and be caught.
	t.Chdir(t.TempDir())
	db := filepath.Join(t.TempDir(), "sb.db")
	for _, args := range [][]string{
		{},
		{"bogus"},
		{"serve", "--no-such-flag"},
		{"serve", "--db", db, "--audit-retention", "-1h"},
		{"serve", "--db", db, "--session-route", "A.1"}, // a load balancer's pattern would have to escape it
		{"todo"},
		{"todo", "add", "--db", db}, // no queue
		{"todo", "add", "--db", db, "--queue", "bad name"}, // invalid queue
		{"todo", "add", "--db", db, "--queue", "inbox"},    // no payload: likely forgotten
		{"todo", "list", "--db", db, "--state", "lost"},
		{"endpoint", "create", "--db", db, "--agent", "x"}, // no queues
		{"endpoint", "create", "--db", db, "--agent", "x", "--queues", "q", "--verbs", "launch_missiles"},
		{"endpoint", "revoke", "--db", db, "abc"},
		// One ID each: a second is refused, not silently ignored.
		{"endpoint", "revoke", "7", "8", "--db", db},
		{"endpoint", "update", "7", "8", "--db", db, "--queues", "q"},
		{"endpoint", "list", "--db", db, "extra"},
		{"webhook", "delete", "7", "8", "--db", db},
		{"webhook", "rotate", "7", "8", "--db", db},
		{"admin", "create", "--db", db}, // no username
		{"admin", "create", "--db", db, "--username", "ana", "hunter22"},
	} {
		code, _, stderr := cli(t, "", args...)
		if code != 2 {
			t.Errorf("%v: exit %d, want 2 (stderr %q)", args, code, stderr)
		}
		if stderr == "" {
			t.Errorf("%v: nothing on stderr", args)
		}
	}
	for _, path := range []string{db, "switchboard.db"} {
		if _, err := os.Stat(path); err == nil {
			t.Errorf("a refused command created %s", path)
		}
	}
}

// TestHelpExitsZero checks that -h works wherever the README says it does:
// after a command with subcommands and before a subcommand's ID, not only
// after a flag set, and that it prints a usage line without touching a database.
func TestHelpExitsZero(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, args := range [][]string{
		{"admin", "-h"},
		{"endpoint", "-h"},
		{"endpoint", "--help"},
		{"endpoint", "update", "-h"},
		{"endpoint", "revoke", "-h"},
		{"modules", "-h"},
		{"secrets", "-h"},
		{"todo", "-h"},
		{"todo", "help"},
		{"webhook", "-h"},
		{"webhook", "rotate", "-h"},
		{"webhook", "delete", "--help"},
		{"todo", "add", "-h"},
		{"serve", "-h"},
	} {
		// Asked for, the usage goes to stdout (so that it pages and greps), and
		// nothing to stderr.
		code, stdout, stderr := cli(t, "", args...)
		if code != 0 {
			t.Errorf("%v: exit %d, want 0 (stderr %q)", args, code, stderr)
		}
		if !strings.Contains(stdout, "usage: switchboard "+args[0]) || stderr != "" {
			t.Errorf("%v: usage on stdout %q, stderr %q", args, stdout, stderr)
		}
	}
	for _, arg := range []string{"-h", "--help", "help"} {
		if code, stdout, stderr := cli(t, "", arg); code != 0 || !strings.Contains(stdout, "usage: switchboard <command>") || stderr != "" {
			t.Errorf("switchboard %s: exit %d, stdout %q, stderr %q", arg, code, stdout, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "switchboard.db")); err == nil {
		t.Error("asking for help created the database")
	}
}

func TestBadDatabaseIsOneClearLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.txt")
	content := []byte("definitely not a database\n")
	os.WriteFile(path, content, 0o600)
	code, _, stderr := cli(t, "", "todo", "add", "--db", path, "--queue", "q", "--payload", "x")
	if code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	if strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "not a Switchboard database") {
		t.Fatalf("stderr = %q, want one line saying it is not a Switchboard database", stderr)
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, content) {
		t.Fatal("the file was modified")
	}
}

func TestEndpointTodoAdminCommands(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	code, out, stderr := cli(t, "", "endpoint", "create", "--db", db, "--agent", "reviewer", "--queues", "inbox,review",
		"--default-lease", "900", "--max-webhooks", "3", "--webhook-sources", "github,stripe", "--json")
	if code != 0 {
		t.Fatalf("endpoint create: exit %d: %s", code, stderr)
	}
	var created struct {
		Credential string   `json:"credential"`
		EndpointID int64    `json:"endpoint_id"`
		AgentID    string   `json:"agent_id"`
		Queues     []string `json:"queues"`
		Lease      int      `json:"default_lease_ttl_seconds"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("endpoint create --json: %v\n%s", err, out)
	}
	if !strings.HasPrefix(created.Credential, "sb_") || created.EndpointID == 0 || created.AgentID != "reviewer" || created.Lease != 900 {
		t.Fatalf("endpoint create --json = %+v", created)
	}

	code, out, _ = cli(t, "", "endpoint", "list", "--db", db)
	if code != 0 || !strings.Contains(out, "reviewer") || strings.Contains(out, created.Credential) {
		t.Fatalf("endpoint list (exit %d) shows the credential or misses the endpoint:\n%s", code, out)
	}
	code, out, _ = cli(t, "", "endpoint", "list", "--db", db, "--json")
	if code != 0 || strings.Contains(out, created.Credential) {
		t.Fatalf("endpoint list --json shows the credential:\n%s", out)
	}

	id := itoa(created.EndpointID)
	if code, _, stderr := cli(t, "", "endpoint", "update", id, "--db", db, "--queues", "inbox", "--default-lease", "60",
		"--rate", "500.5", "--burst", "1000"); code != 0 {
		t.Fatalf("endpoint update: %s", stderr)
	}
	st := openRO(t, db)
	ep, err := st.Endpoint(context.Background(), created.EndpointID)
	st.Close()
	if err != nil || ep.DefaultLeaseTTL != 60 || len(ep.Queues) != 1 || ep.Ceiling.MaxWebhooks != 3 ||
		ep.RatePerSecond != 500.5 || ep.RateBurst != 1000 {
		t.Fatalf("after update: %+v, %v", ep, err)
	}
	if code, _, stderr := cli(t, "", "endpoint", "update", id, "--db", db, "--rate", "-1"); code != 2 || !strings.Contains(stderr, "negative") {
		t.Fatalf("endpoint update --rate -1: exit %d, %q", code, stderr)
	}
	// 0 goes back to the server's default.
	if code, _, stderr := cli(t, "", "endpoint", "update", id, "--db", db, "--rate", "0"); code != 0 {
		t.Fatalf("endpoint update --rate 0: %s", stderr)
	}
	st = openRO(t, db)
	ep, _ = st.Endpoint(context.Background(), created.EndpointID)
	st.Close()
	if ep.RatePerSecond != 0 || ep.RateBurst != 1000 {
		t.Fatalf("after --rate 0: rate %v, burst %d", ep.RatePerSecond, ep.RateBurst)
	}

	if code, _, stderr := cli(t, "", "todo", "add", "--db", db, "--queue", "inbox", "--payload", `{"pr":42}`); code != 0 {
		t.Fatalf("todo add: %s", stderr)
	}
	if code, _, stderr := cli(t, "", "todo", "add", "--db", db, "--queue", "pings", "--payload", ""); code != 0 {
		t.Fatalf("todo add with an empty payload asked for: %s", stderr)
	}
	payloadFile := filepath.Join(t.TempDir(), "p.json")
	os.WriteFile(payloadFile, []byte(`{"from":"file"}`), 0o600)
	if code, _, stderr := cli(t, "", "todo", "add", "--db", db, "--queue", "review", "--payload-file", payloadFile); code != 0 {
		t.Fatalf("todo add --payload-file: %s", stderr)
	}
	if code, _, stderr := cli(t, `{"from":"stdin"}`, "todo", "add", "--db", db, "--queue", "review", "-"); code != 0 {
		t.Fatalf("todo add -: %s", stderr)
	}
	code, out, _ = cli(t, "", "todo", "list", "--db", db, "--queue", "review", "--json")
	var todos []store.Todo
	if err := json.Unmarshal([]byte(out), &todos); err != nil || code != 0 {
		t.Fatalf("todo list --json: %v\n%s", err, out)
	}
	if len(todos) != 2 || todos[0].PayloadSize != len(`{"from":"stdin"}`) || todos[0].Payload != "" {
		t.Fatalf("todo list --json = %+v", todos)
	}

	if code, _, stderr := cli(t, "a long enough password\n", "admin", "create", "--db", db, "--username", "ana"); code != 0 {
		t.Fatalf("admin create: %s", stderr)
	}
	st = openRO(t, db)
	defer st.Close()
	if _, err := st.CheckPassword(context.Background(), "ana", "a long enough password"); err != nil {
		t.Fatalf("password from stdin not stored: %v", err)
	}

	if code, _, _ := cli(t, "", "endpoint", "revoke", id, "--db", db); code != 0 {
		t.Fatal("endpoint revoke failed")
	}
	if _, err := st.EndpointByCredential(context.Background(), created.Credential); err == nil {
		t.Fatal("revoked credential still resolves")
	}
}

// openRW opens (creating it if need be) the database at path beside the commands a
// test runs on it, as another process would; it is closed when the test ends.
func openRW(t *testing.T, path string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), path, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func openRO(t *testing.T, path string) *store.Store {
	t.Helper()
	s, err := store.Open(context.Background(), path, store.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

func TestVersion(t *testing.T) {
	code, out, _ := cli(t, "", "version")
	if code != 0 || !strings.HasPrefix(out, "switchboard ") || !strings.Contains(out, "go1.") {
		t.Fatalf("version: exit %d, %q", code, out)
	}
}

// startServer runs a server as serve builds it on a free loopback port until
// the test ends.
func startServer(t *testing.T, cfg server.Config) (base string, stop func()) {
	t.Helper()
	base, _, stop = servertest.Start(t, cfg)
	return base, stop
}

// startServerLogging is startServer with the server's logger, and the server.
func startServerLogging(t *testing.T, cfg server.Config, logger *slog.Logger) (base string, srv *server.Server, stop func()) {
	t.Helper()
	cfg.Logger = logger
	return servertest.Start(t, cfg)
}

// /readyz gives its verdict to anyone (a load balancer's probe) and its detail
// (database errors, module names, pids, tools) only to --metrics-allow addresses.
func TestReadyzDetailOnlyForMetricsAllow(t *testing.T) {
	base, _ := startServer(t, server.Config{})
	if code, body := servertest.Readyz(t, base); code != 200 || body["database"] != "ok" || body["ready"] != true {
		t.Fatalf("loopback (allowed by default): %d %v", code, body)
	}
	base, _ = startServer(t, server.Config{MetricsAllow: "10.9.9.9/32"})
	code, body := servertest.Readyz(t, base)
	if code != 200 || body["ready"] != true || len(body) != 2 || !strings.Contains(fmt.Sprint(body["detail"]), "--metrics-allow") {
		t.Fatalf("an address outside --metrics-allow: %d %v", code, body)
	}
	// modules list says why it could not ask, and falls back to the manifests.
	if code, _, errs := cli(t, "", "modules", "list", "--url", base); !strings.Contains(errs, "served only to --metrics-allow") {
		t.Fatalf("modules list from outside --metrics-allow: exit %d %q", code, errs)
	}
}

// A setting in the environment that does not parse stops serve with its name,
// rather than quietly taking the default (say, never pruning the audit log).
func TestServeRefusesUnparsableEnvironment(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	for name, value := range map[string]string{"SWITCHBOARD_AUDIT_RETENTION": "365d", "SWITCHBOARD_MAX_BODY": "1MB",
		"SWITCHBOARD_TRUST_PROXY": "maybe"} {
		code, _, stderr := runCLI(t, map[string]string{name: value}, "serve", "--db", db)
		if code != 2 || !strings.Contains(stderr, name) || !strings.Contains(stderr, value) {
			t.Errorf("serve with %s=%s: exit %d, %q", name, value, code, stderr)
		}
	}
	if _, err := os.Stat(db); err == nil {
		t.Error("serve created its database before refusing the environment")
	}
}

// An on/off setting takes the words people write for on, rather than reading
// anything but "1" as off (a proxy setting read as off drops Secure cookies).
func TestEnvBool(t *testing.T) {
	for v, want := range map[string]bool{"": false, "0": false, "off": false, "No": false, "false": false,
		"1": true, "true": true, "TRUE": true, "yes": true, " on ": true} {
		var bad []string
		env := &environ{getenv: func(string) string { return v }}
		if got := envBool(env, "SWITCHBOARD_TRUST_PROXY", &bad); got != want || len(bad) != 0 {
			t.Errorf("%q: %v (errors %v), want %v", v, got, bad, want)
		}
	}
}

// Bound to every interface, serve's own address is no URL anyone can call: it
// warns when that address would end up in ingest URLs.

// metric reads one unlabelled gauge from serve's /metrics.
func metric(t *testing.T, base, name string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
	}
	t.Fatalf("/metrics has no %s", name)
	return 0
}

// serve wires its foreign-commit watch to the agent: an endpoint revoked from
// another process (the CLI) loses its open doorbell stream within moments, not
// at the agent's periodic 30 s re-check.
func TestServeEndsRevokedStreamsPromptly(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	base, _ := startServer(t, server.Config{DB: db, MetricsAllow: "127.0.0.1"})
	other, err := store.Open(t.Context(), db, store.Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	queues, verbs := []string{"inbox"}, store.AllVerbs()
	ep, cred, err := other.CreateEndpoint(t.Context(), "doomed", store.EndpointSpec{Queues: &queues, Verbs: &verbs}, "human:cli")
	if err != nil {
		t.Fatal(err)
	}
	revokedStreamEnds(t, base, other, cred, 0, func() error { return other.RevokeEndpoint(t.Context(), ep.ID, "human:cli") })
}

// Errors read as a person would say them: no package names, nothing said twice,
// no sentinel after a reason. Each is wrapped once where it is made, so
// cliMessage cuts no more than the store's prefix, the sentinel, and the
// command's name where the store's operation repeats it.
func TestCLIMessage(t *testing.T) {
	for _, c := range []struct {
		command string
		err     error
		want    string
	}{
		{"todo", fmt.Errorf("store: todo 42: %w", store.ErrNotFound), "todo 42: not found"},
		{"operator", fmt.Errorf("store: create operator: password must be at least 8 characters: %w", store.ErrInvalid),
			"create operator: password must be at least 8 characters"},
		{"backup", fmt.Errorf("store: backup: /tmp/b.db: %w", os.ErrExist), "/tmp/b.db: file already exists"},
		{"restore", fmt.Errorf("store: restore: no backup at /x: %w", os.ErrNotExist), "no backup at /x"},
		{"todo", store.ErrInvalid, "invalid argument"},
		{"serve", errors.New("listen on :80: permission denied"), "listen on :80: permission denied"},
		// What the user named is said as they named it: a file called as the
		// command is, a quoted name with ": " in it, and an errno whose text
		// happens to be a sentinel's is the only reason given.
		{"backup", fmt.Errorf("store: backup: %s: %w", "backup", os.ErrExist), "backup: file already exists"},
		{"admin", fmt.Errorf("store: operator %q: %w", "ops: store: ops", store.ErrNotFound), `operator "ops: store: ops": not found`},
		{"admin", fmt.Errorf("store: operator %q: %w", `o"ps: store: ops`, store.ErrNotFound), `operator "o\"ps: store: ops": not found`},
		{"backup", fmt.Errorf("store: backup: %w", &fs.PathError{Op: "sync", Path: "/mnt/usb", Err: syscall.EINVAL}),
			"sync /mnt/usb: invalid argument"},
		// A name the user chose is never cut, even one that reads as a package
		// or a command.
		{"backup", fmt.Errorf("store: backup: %s: %w", "store", os.ErrExist), "store: file already exists"},
		{"todo", fmt.Errorf("store: add todo: queue %s: %w", "todo", store.ErrInvalid), "add todo: queue todo"},
	} {
		if got := cliMessage(c.command, c.err); got != c.want {
			t.Errorf("cliMessage(%q, %q) = %q, want %q", c.command, c.err, got, c.want)
		}
	}
}

// The usage a mistyped flag or -h prints shows --db's default, SWITCHBOARD_DB,
// as the server it names, never its password.
func TestUsageHidesTheDatabasePassword(t *testing.T) {
	t.Chdir(t.TempDir())
	for _, db := range []string{"postgres://sb:hunter2@db.example:5432/sb", "host=db.example user=sb password=hunter2"} {
		for _, args := range [][]string{
			{"serve", "-h"}, {"serve", "--bogus"}, {"todo", "list", "--bogus"}, {"backup", "-h"},
			{"restore", "--bogus"}, {"operator", "create", "-h"}, {"endpoint", "list", "--bogus"},
			{"webhook", "list", "-h"}, {"queue", "pause", "--bogus"},
		} {
			var out, errb bytes.Buffer
			env := &environ{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string {
				if k == "SWITCHBOARD_DB" {
					return db
				}
				return ""
			}}
			run(context.Background(), env, args)
			if all := out.String() + errb.String(); strings.Contains(all, "hunter2") || !strings.Contains(all, "-db") {
				t.Errorf("%v with SWITCHBOARD_DB=%q printed:\n%s", args, db, all)
			}
		}
	}
}
