package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// needPgRestore skips (fails under SWITCHBOARD_REQUIRE_EXTERNAL=1) without
// pg_restore on PATH: restore's advice asks it what the file is.
func needPgRestore(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("pg_restore"); err != nil {
		testkit.SkipOrFail(t, "no pg_restore on PATH: the file not read")
	}
}

// A plain SQL dump is pg_dump's too, but pg_restore does not read it ("Please
// use psql"): restore prints psql's command for it, without the password.
func TestRestoreAdviceForAPlainSQLDump(t *testing.T) {
	needPgRestore(t)
	dump := filepath.Join(t.TempDir(), "sb 2026.sql")
	if err := os.WriteFile(dump, []byte("--\n-- PostgreSQL database dump\n--\n\nSET statement_timeout = 0;\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err := PgDumpAdvice("restore", "postgres://sb:hunter2@127.0.0.1:1/sb?search_path=switchboard", dump)
	advice := err.Error()
	cmd, _ := AdviceCommand(advice)
	want := "psql --single-transaction --set ON_ERROR_STOP=1 --dbname=postgres://sb@127.0.0.1:1/sb -f '" + dump + "'"
	if cmd != want || !errors.Is(err, ErrSQLiteOnly) || strings.Contains(advice, "hunter2") ||
		strings.Contains(advice, "pg_restore --") || !strings.Contains(advice, "plain SQL dump") ||
		!strings.Contains(advice, "the schema the dump names") || !strings.Contains(advice, PasswordNote) {
		t.Errorf("restore advice for a plain SQL dump:\n%s\nwant the command %q, no password", advice, want)
	}
}

// A file that is neither a SQLite database nor an archive of pg_dump's gets no
// command that cannot work: restore refuses it with pg_restore's reason. A file
// that begins as an archive (pg_restore here may be older than the pg_dump
// that wrote it) keeps its pg_restore command.
func TestRestoreAdviceRefusesWhatIsNoArchive(t *testing.T) {
	needPgRestore(t)
	dir := t.TempDir()
	junk, empty, stub := filepath.Join(dir, "junk.bin"), filepath.Join(dir, "empty"), filepath.Join(dir, "b.dump")
	os.WriteFile(junk, []byte("hello\n"), 0o600)
	os.WriteFile(empty, nil, 0o600)
	os.WriteFile(stub, []byte("PGDMP\x01\x0f"), 0o600)
	db := "postgres://sb:hunter2@127.0.0.1:1/sb"
	for file, reason := range map[string]string{
		junk:                    "does not appear to be a valid archive",
		empty:                   "too short",
		filepath.Join(dir, "."): "does not appear to be a valid archive", // a directory without toc.dat
		dumpall(t, dir):         "text format dump",
	} {
		err := PgDumpAdvice("restore", db, file)
		msg := err.Error()
		if _, ok := AdviceCommand(msg); ok || !errors.Is(err, ErrNotSwitchboard) || errors.Is(err, ErrSQLiteOnly) ||
			!strings.Contains(msg, "neither a SQLite database nor a pg_dump archive") || !strings.Contains(msg, reason) ||
			strings.Contains(msg, "hunter2") || strings.Contains(msg, "\n") {
			t.Errorf("restore advice for %s: %q, want a refusal on one line with pg_restore's reason %q", file, msg, reason)
		}
	}
	advice := PgDumpAdvice("restore", db, stub).Error()
	if cmd, _ := AdviceCommand(advice); !strings.HasPrefix(cmd, "pg_restore --clean --if-exists ") ||
		!strings.Contains(advice, "pg_restore --list here refuses it: ") {
		t.Errorf("restore advice for an archive's first bytes: %s", advice)
	}
}

// dumpall writes a file as pg_dumpall begins one: text for psql, but of every
// database, not one schema's.
func dumpall(t *testing.T, dir string) string {
	path := filepath.Join(dir, "all.sql")
	if err := os.WriteFile(path, []byte("--\n-- PostgreSQL database cluster dump\n--\n\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The psql command restore prints for a plain SQL dump runs as printed (the
// password, if any, from PGPASSWORD) and puts the rows back.
func TestRestoreAdviceForAPlainSQLDumpRuns(t *testing.T) {
	db := testkit.PostgresURL(t)
	var bins [2]string
	for i, name := range []string{"pg_dump", "psql"} {
		bin, err := exec.LookPath(name)
		if err != nil {
			testkit.SkipOrFail(t, "no %s on PATH: the dump not made and run", name)
			return
		}
		bins[i] = bin
	}
	needPgRestore(t)
	ctx := context.Background()
	s, err := Open(ctx, db, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	addTodos(t, s, "inbox", 2)
	s.Close()
	cfg, err := pgconn.ParseConfig(db)
	if err != nil {
		t.Fatal(err)
	}
	schema := cfg.RuntimeParams["search_path"]
	dump := filepath.Join(t.TempDir(), "switchboard.sql")
	base := os.Getenv("SWITCHBOARD_TEST_POSTGRES")
	if out, err := exec.Command(bins[0], "--clean", "--if-exists", "--file="+dump, "--schema="+schema, base).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	advice := PgDumpAdvice("restore", db, dump).Error()
	cmd, _ := AdviceCommand(advice)
	if !strings.HasPrefix(cmd, "psql ") || !strings.Contains(advice, "whatever the --db's ("+schema+")") {
		t.Fatalf("restore advice for a plain SQL dump: %s", advice)
	}
	conn, err := pgx.Connect(ctx, db) // its triggers read the schema's other tables
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DELETE FROM `+schema+`.todos`); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", strings.Replace(cmd, "psql", bins[1], 1))
	sh.Env = append(os.Environ(), "PGPASSWORD="+cfg.Password)
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.todos`).Scan(&n); err != nil || n != 2 {
		t.Errorf("after %s: %d todos in %s (%v)", cmd, n, schema, err)
	}
}

// Without pg_restore at hand nothing tells what the file is: restore prints
// the pg_restore command, as for an archive.
func TestRestoreAdviceWithoutPgRestore(t *testing.T) {
	junk := filepath.Join(t.TempDir(), "junk.bin")
	os.WriteFile(junk, []byte("hello\n"), 0o600)
	t.Setenv("PATH", t.TempDir())
	err := PgDumpAdvice("restore", "postgres://sb@127.0.0.1:1/sb", junk)
	if cmd, _ := AdviceCommand(err.Error()); !errors.Is(err, ErrSQLiteOnly) || !strings.HasPrefix(cmd, "pg_restore --clean --if-exists ") {
		t.Errorf("restore advice without pg_restore: %s", err)
	}
}
