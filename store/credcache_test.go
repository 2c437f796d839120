package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
)

// serve keeps the endpoints it authenticated; a change made by another process
// (the CLI, here a second Store on the same file) must reach its next lookup.
func TestCredentialLookupSeesOtherProcessesChanges(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sb.db")
	open := func() *Store {
		s, err := Open(ctx, path, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	serve, cli := open(), open()
	verbs, queues := []string{"claim_next"}, []string{"inbox"}
	ep, cred, err := serve.CreateEndpoint(ctx, "worker", EndpointSpec{Verbs: &verbs, Queues: &queues}, "system")
	if err != nil {
		t.Fatal(err)
	}
	got, err := serve.EndpointByCredential(ctx, cred)
	if err != nil || !slices.Equal(got.Queues, queues) {
		t.Fatalf("first lookup: %+v, %v", got, err)
	}
	// What a caller does to its copy, found or kept, does not reach the next one.
	for i := range 2 {
		got.Queues[0] = "payroll"
		if got, err = serve.EndpointByCredential(ctx, cred); err != nil || got.Queues[0] != "inbox" {
			t.Fatalf("lookup %d: %+v, %v", i+2, got, err)
		}
	}

	wider := []string{"inbox", "ops"}
	if _, err := cli.UpdateEndpoint(ctx, ep.ID, EndpointSpec{Queues: &wider}, "human:cli"); err != nil {
		t.Fatal(err)
	}
	if got, err := serve.EndpointByCredential(ctx, cred); err != nil || !slices.Equal(got.Queues, wider) {
		t.Fatalf("after another process widened the scope: %+v, %v", got.Queues, err)
	}
	if err := cli.RevokeEndpoint(ctx, ep.ID, "human:cli"); err != nil {
		t.Fatal(err)
	}
	if _, err := serve.EndpointByCredential(ctx, cred); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after another process revoked it: %v, want ErrNotFound", err)
	}
}
