package store

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// One process leads the reaper while its lease is renewed; when it stops beating
// another takes the role once the lease has lapsed, and not before; a process that
// stops cleanly hands the role over at once.
func TestReaperRoleMovesWhenItsHolderStopsBeating(t *testing.T) {
	testkit.SQLiteOnly(t, "leases of roles follow the database's clock there, which this test's clock does not move (TestRoleLeasesFollowTheDatabasesClock)")
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	for _, id := range []string{"a", "b"} {
		if err := s.RegisterProcess(ctx, Process{ID: id, Host: "h", PID: 1, Version: "v-" + id, StartedAt: clock.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	beat := func(id string) []string {
		t.Helper()
		held, err := s.ProcessBeat(ctx, id, Beat{Roles: []string{RoleReaper}, LeaseFor: 6 * time.Second,
			Modules: []ProcessModule{{Name: "gh", State: "up"}}})
		if err != nil {
			t.Fatal(err)
		}
		return held
	}
	leads := func(id string) bool { return slices.Equal(beat(id), []string{RoleReaper}) }
	if !leads("a") || leads("b") {
		t.Fatal("the first to beat should lead, the second not")
	}
	clock.Add(5 * time.Second)
	if !leads("a") {
		t.Fatal("a renewing its lease should keep the role")
	}
	clock.Add(5 * time.Second)
	if leads("b") {
		t.Fatal("b took the role while a's renewed lease ran")
	}
	clock.Add(2 * time.Second) // a silent past its lease
	if !leads("b") || leads("a") {
		t.Fatal("b should take the role once a's lease lapsed, and a not get it back")
	}
	list, err := s.ListProcesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || !slices.Equal(list[0].Modules, []ProcessModule{{Name: "gh", State: "up"}}) {
		t.Fatalf("processes %+v", list)
	}
	for _, p := range list {
		if want := p.ID == "b"; slices.Contains(p.Roles, RoleReaper) != want || p.Version != "v-"+p.ID {
			t.Fatalf("process %+v: leads should be %v", p, want)
		}
	}
	if err := s.RemoveProcess(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if !leads("a") {
		t.Fatal("a should take the role at once when b stopped cleanly")
	}
	if _, err := s.ProcessBeat(ctx, "b", Beat{}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a removed process's heartbeat: %v, want ErrNotFound", err)
	}
}

// A process alone on its database (SQLite's one serve) takes a role that one
// before it left behind at once; rows silent for processForget are deleted.
func TestAloneTakesALeftRoleAndOldRowsAgeOut(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	lease := time.Minute
	if s.pg {
		lease = -time.Second // leases follow the database's clock there, which this test's clock does not move
	}
	for _, id := range []string{"crashed", "next"} {
		if err := s.RegisterProcess(ctx, Process{ID: id, Host: "h", PID: 1, Version: "v", StartedAt: clock.Now()}); err != nil {
			t.Fatal(err)
		}
		held, err := s.ProcessBeat(ctx, id, Beat{Roles: []string{RoleReaper}, LeaseFor: lease, Alone: true})
		if err != nil || !slices.Equal(held, []string{RoleReaper}) {
			t.Fatalf("%s: held %v, %v", id, held, err)
		}
		clock.Add(time.Second)
	}
	clock.Add(processForget)
	if _, err := s.ProcessBeat(ctx, "next", Beat{}); err != nil {
		t.Fatal(err)
	}
	list, err := s.ListProcesses(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != "next" || len(list[0].Roles) != 0 {
		t.Fatalf("processes %+v, want only next, its lease over", list)
	}
}
