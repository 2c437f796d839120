package store

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// A role or server that takes no writes (a standby, or
// default_transaction_read_only, here the URL's) refused even the CREATE TABLE
// IF NOT EXISTS of schema_migrations that opening begins with: a command that
// only reads failed with "create schema_migrations … read-only transaction",
// though the tables were there. Such a store now opens and reads; on a schema
// never migrated it says that the connection takes no writes.
func TestAReadOnlyConnectionOpensAMigratedSchema(t *testing.T) {
	url := testkit.PostgresURL(t)
	ctx := context.Background()
	s, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	added, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "x"})
	s.Close()
	if err != nil {
		t.Fatal(err)
	}

	ro, err := Open(ctx, url+"&default_transaction_read_only=on", Options{MigrateUnservedOnly: true})
	if err != nil {
		t.Fatalf("open a migrated schema read-only: %v", err)
	}
	defer ro.Close()
	got, err := ro.Todo(ctx, added.ID)
	if err != nil || got.ID != added.ID {
		t.Fatalf("read todo %d read-only: %+v, %v", added.ID, got, err)
	}
	if _, err := ro.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "y"}); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Errorf("an add on a read-only connection: %v, want PostgreSQL's read-only refusal", err)
	}

	empty := testkit.PostgresURL(t)
	_, err = Open(ctx, empty+"&default_transaction_read_only=on", Options{})
	if err == nil || !strings.Contains(err.Error(), "takes no writes") {
		t.Errorf("open an empty schema read-only: %v, want it to say the connection takes no writes", err)
	}
}
