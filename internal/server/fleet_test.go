package server_test

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/internal/server/servertest"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// A serve keeps its row in the processes table, with its version, while it runs,
// holds the reaper's role (it is alone), and removes the row as it stops.
func TestServeKeepsItsProcessRowWhileItRuns(t *testing.T) {
	db := testkit.DB(t)
	_, _, stop := servertest.Start(t, server.Config{DB: db, Version: "v-fleet-test"})
	ctx := context.Background()
	st, err := store.Open(ctx, db, store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var list []store.Process
	// Run registers the process and beats as it starts, after Start has returned.
	for deadline := time.Now().Add(10 * time.Second); (len(list) == 0 || len(list[0].Roles) == 0) && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if list, err = st.ListProcesses(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if len(list) != 1 {
		t.Fatalf("processes %+v, want this one", list)
	}
	p := list[0]
	if p.Version != "v-fleet-test" || p.PID != os.Getpid() || !slices.Equal(p.Roles, []string{store.RoleReaper}) || p.ID == "" {
		t.Fatalf("process %+v", p)
	}
	stop()
	if list, err = st.ListProcesses(ctx); err != nil || len(list) != 0 {
		t.Fatalf("after stop: processes %+v, %v; want none", list, err)
	}
}
