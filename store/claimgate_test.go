package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// The copy to PostgreSQL holds its source for the whole copy, so that no serve
// starts on it meanwhile, even on a database that was never served (no lock
// file yet).
func TestCopyHoldKeepsOutAServeStartingDuringIt(t *testing.T) {
	testkit.SQLiteOnly(t, "the serve lock is a file")
	path := filepath.Join(t.TempDir(), "sb.db")
	s, err := Open(context.Background(), path, quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path + ".lock"); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("lock file before any serve: %v", err)
	}
	release, err := holdIfServed(path) // what CopyToPostgres holds for the whole copy
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	unlock, err := LockForServe(path) // a serve starting while the copy runs
	if err == nil {
		unlock()
		t.Fatal("a serve took the lock of a database the copy to PostgreSQL is holding: what it commits after the snapshot is lost")
	}
}

// A claim on more queues than SQLite has variables for: the claim gate takes
// them as one argument.
func TestClaimOnManyQueues(t *testing.T) {
	s := openTest(t, Options{})
	queues := make([]string, 33000)
	for i := range queues {
		queues[i] = fmt.Sprintf("q%d", i)
	}
	id := addTodos(t, s, queues[len(queues)-1], 1)[0]
	td, ok, err := s.ClaimNext(context.Background(), "agent:w", queues, time.Minute)
	if err != nil {
		t.Fatalf("claim on %d queues: %v", len(queues), err)
	}
	if !ok || td.ID != id {
		t.Fatalf("claimed %d (ok %v), want %d", td.ID, ok, id)
	}
}

// A claim on no queues claims nothing, on both databases.
func TestClaimOnNoQueues(t *testing.T) {
	s := openTest(t, Options{})
	addTodos(t, s, "qa", 1)
	for _, qs := range [][]string{nil, {}} {
		if _, ok, err := s.ClaimNext(context.Background(), "agent:w", qs, time.Minute); err != nil || ok {
			t.Errorf("claim on %#v: ok %v err %v", qs, ok, err)
		}
	}
}
