package testkit

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The store-backed tests run on SQLite always. With SWITCHBOARD_TEST_BACKEND=postgres
// (and SWITCHBOARD_TEST_POSTGRES naming a server) the same tests run on PostgreSQL
// instead, each in a schema of its own; .ci/run runs the suites both ways. Tests
// that only PostgreSQL can fail (two stores racing) ask for PostgresURL directly.

// OnPostgres reports whether this test run puts its stores on PostgreSQL.
func OnPostgres() bool { return os.Getenv("SWITCHBOARD_TEST_BACKEND") == "postgres" }

// DB names a fresh, empty database for one test: a SQLite file in t.TempDir(), or
// on PostgreSQL runs a new schema (dropped when the test ends).
func DB(t testing.TB) string {
	t.Helper()
	if OnPostgres() {
		return PostgresURL(t)
	}
	return filepath.Join(t.TempDir(), "switchboard.db")
}

// SQLiteOnly skips a test of something PostgreSQL does not have (a file, its
// pragmas, its WAL) on a PostgreSQL run.
func SQLiteOnly(t testing.TB, why string) {
	t.Helper()
	if OnPostgres() {
		t.Skip("SQLite only: " + why)
	}
}

// PostgresURL returns the URL of a new, empty schema on the server that
// SWITCHBOARD_TEST_POSTGRES names, dropped when the test ends. Without the
// variable the test skips (fails under SWITCHBOARD_REQUIRE_EXTERNAL=1).
func PostgresURL(t testing.TB) string {
	t.Helper()
	base := os.Getenv("SWITCHBOARD_TEST_POSTGRES")
	if base == "" {
		SkipOrFail(t, "SWITCHBOARD_TEST_POSTGRES names no PostgreSQL server (see docs/development.md)")
		return ""
	}
	var b [6]byte
	rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to SWITCHBOARD_TEST_POSTGRES: %v", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create test schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgx.Connect(ctx, base); err == nil {
			conn.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE")
			conn.Close(ctx)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		t.Fatalf("SWITCHBOARD_TEST_POSTGRES: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
