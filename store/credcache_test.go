package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// serve keeps the endpoints it authenticated; a change made by another process
// (the CLI, here a second Store on the same file) must reach its next lookup.
func TestCredentialLookupSeesOtherProcessesChanges(t *testing.T) {
	ctx := context.Background()
	serve, cli := serveAndCLI(t, filepath.Join(t.TempDir(), "sb.db"))
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

// While the foreign-commit watch runs, a lookup trusts the cache's generation
// instead of reading endpoint_epoch. A change made through this Store still
// applies at the next lookup; one made by another process (a second Store on
// the same database: the CLI, or another serve of a fleet) once the watch has
// looked, within credWatchFresh.
func TestCredentialLookupUnderTheWatch(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		t.Run(backend, func(t *testing.T) {
			db := filepath.Join(t.TempDir(), "sb.db")
			if backend == "postgres" {
				db = testkit.PostgresURL(t)
			}
			checkLookupUnderTheWatch(t, db)
		})
	}
}

func checkLookupUnderTheWatch(t *testing.T, db string) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serve, cli := serveAndCLI(t, db)
	verbs, queues := []string{"claim_next"}, []string{"inbox"}
	spec := EndpointSpec{Verbs: &verbs, Queues: &queues}
	mine, myCred, err := serve.CreateEndpoint(ctx, "mine", spec, "system")
	if err != nil {
		t.Fatal(err)
	}
	theirs, theirCred, err := cli.CreateEndpoint(ctx, "theirs", spec, "system")
	if err != nil {
		t.Fatal(err)
	}
	watching := make(chan struct{})
	go func() { serve.WatchForeign(ctx, 20*time.Millisecond); close(watching) }()
	defer func() { cancel(); <-watching }()
	until(t, "the watch looked", func() bool { return serve.creds.watchedLately() })
	for _, cred := range []string{myCred, theirCred} {
		if _, err := serve.EndpointByCredential(ctx, cred); err != nil {
			t.Fatal(err)
		}
	}

	// This process's own revocation: refused at the next lookup.
	if err := serve.RevokeEndpoint(ctx, mine.ID, "human:board"); err != nil {
		t.Fatal(err)
	}
	if _, err := serve.EndpointByCredential(ctx, myCred); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after this process revoked it: %v, want ErrNotFound", err)
	}

	// Another process's edit, then its revocation: seen once the watch looks.
	wider := []string{"inbox", "ops"}
	if _, err := cli.UpdateEndpoint(ctx, theirs.ID, EndpointSpec{Queues: &wider}, "human:cli"); err != nil {
		t.Fatal(err)
	}
	until(t, "the other process's edit reached the lookup", func() bool {
		got, err := serve.EndpointByCredential(ctx, theirCred)
		return err == nil && slices.Equal(got.Queues, wider)
	})
	if err := cli.RevokeEndpoint(ctx, theirs.ID, "human:cli"); err != nil {
		t.Fatal(err)
	}
	until(t, "the other process's revocation reached the lookup", func() bool {
		_, err := serve.EndpointByCredential(ctx, theirCred)
		return errors.Is(err, ErrNotFound)
	})
	if !serve.creds.watchedLately() {
		t.Fatal("the watch stopped looking: the lookups read endpoint_epoch, and this test proved nothing of the watch")
	}
}

// serveAndCLI opens two Stores on db, as serve and the CLI each do.
func serveAndCLI(t *testing.T, db string) (serve, cli *Store) {
	open := func() *Store {
		s, err := Open(context.Background(), db, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	return open(), open()
}

// until waits for cond, failing the test after ten seconds: a liveness bound,
// far above what a working store takes.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10 s", what)
		}
	}
}

// The generation moves with this process's changes and with a new reading of
// endpoint_epoch, and an entry kept under an older one is not used.
func TestCredCacheGeneration(t *testing.T) {
	var c credCache
	key, ep := []byte("k"), Endpoint{ID: 7}
	c.seen(3)
	g := c.generation()
	c.put(key, g, ep)
	if got, ok := c.get(key, c.generation()); !ok || got.ID != 7 {
		t.Fatalf("kept entry: %+v, %v", got, ok)
	}
	c.seen(3) // the same reading: nothing changed
	if _, ok := c.get(key, c.generation()); !ok {
		t.Fatal("an unchanged epoch dropped the entry")
	}
	c.changed()
	if _, ok := c.get(key, c.generation()); ok {
		t.Fatal("used after this process changed an endpoint")
	}
	c.put(key, c.generation(), ep)
	c.seen(4)
	if _, ok := c.get(key, c.generation()); ok {
		t.Fatal("used after endpoint_epoch moved")
	}
	if c.watchedLately() {
		t.Fatal("watched before any look")
	}
	c.watched(time.Now().Add(-credWatchFresh))
	if c.watchedLately() {
		t.Fatal("a look credWatchFresh ago still counts")
	}
	c.watched(time.Now())
	if !c.watchedLately() {
		t.Fatal("a look just now does not count")
	}
}

// Revoking an endpoint hands its agent's todos back and rings for them as it
// commits. An agent woken by that ring (the revoked one's own session among
// them) is looked up again: the revocation must be seen by then, though the
// revoking call has not returned yet (the board's revoked worker reclaimed its
// todo about one time in two).
func TestRevocationIsSeenByLookupsItsRingsWake(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	ep, cred, err := s.CreateEndpoint(ctx, "worker", EndpointSpec{Queues: &[]string{"inbox"}}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	td, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Claim(ctx, Ack{ID: td.ID, Owner: "agent:worker"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EndpointByCredential(ctx, cred); err != nil {
		t.Fatal(err)
	}
	var woken []error
	s.OnTodoChange(func(c TodoChange) {
		if c.ID == td.ID && c.Claimable {
			_, err := s.EndpointByCredential(ctx, cred)
			woken = append(woken, err)
		}
	})
	// The watch of other processes' commits has just looked (serve's looks
	// every half second): nothing tells a lookup to read the epoch itself.
	s.creds.watched(time.Now())
	if r, err := s.RevokeEndpointReleasing(ctx, ep.ID, "human:1"); err != nil || r.Released != 1 {
		t.Fatalf("revoke: %+v, %v", r, err)
	}
	if len(woken) != 1 || !errors.Is(woken[0], ErrNotFound) {
		t.Fatalf("the lookups the release's ring woke: %v, want one ErrNotFound", woken)
	}
}
