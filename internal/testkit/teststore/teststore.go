// Package teststore opens the real SQLite store that tests of the packages above
// it run on. It is apart from testkit because the store's own tests use testkit
// (its clock), and they cannot import a package that imports the store.
package teststore

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// Open opens a fresh store (a file in t.TempDir(), or a schema of its own on
// PostgreSQL runs: see testkit.DB) and closes it when the test ends. A nil Logger
// is a quiet one: the store's logs are not the test's output.
func Open(t testing.TB, opts store.Options) *store.Store {
	t.Helper()
	return OpenPath(t, testkit.DB(t), opts)
}

// OpenPath opens the store on path, for a test that opens one file twice (a
// second process) or names the file itself.
func OpenPath(t testing.TB, path string, opts store.Options) *store.Store {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.PasswordCost == 0 {
		opts.PasswordCost = bcrypt.MinCost // checks in milliseconds, under the race detector too
	}
	st, err := store.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
