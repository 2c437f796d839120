package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// The Processes page says which processes are alive and which version each
// runs, warns of a mixed-version fleet, and marks a silent one gone; the Modules
// page shows each live process's state of a module.
func TestProcessesPageShowsTheFleet(t *testing.T) {
	fm := &fakeModules{status: sampleModules()}
	f := newFixture(t, Options{Modules: fm, Heartbeat: 2 * time.Second})
	ctx := context.Background()
	beat := func(id, version, state string, lease time.Duration) {
		t.Helper()
		err := f.st.RegisterProcess(ctx, store.Process{ID: id, Host: "host-" + id, PID: 100, Version: version, StartedAt: f.clock.Now()})
		if err == nil {
			_, err = f.st.ProcessBeat(ctx, id, store.Beat{Modules: []store.ProcessModule{{Name: "everything", State: state}},
				Roles: []string{store.RoleReaper}, LeaseFor: lease})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	// dead1's lease has lapsed: on PostgreSQL leases follow the database's
	// clock, which the test's clock does not move.
	beat("dead1", "v0.9.0", "up", -time.Second)
	f.clock.Add(time.Minute)
	beat("old1", "v1.0.0", "up", 6*time.Second)
	beat("new1", "v1.1.0", "backoff", 6*time.Second)
	cookie, _ := f.login()
	res, body := f.get("/processes", cookie)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	for _, want := range []string{"run 2 versions (v1.0.0, v1.1.0)", `data-process="old1"`, "host-new1",
		`<span class="badge done">alive</span> <span class="badge">reaper</span>`, `<span class="badge failed">gone</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("processes page lacks %q", want)
		}
	}
	if strings.Count(body, `<span class="badge">reaper</span>`) != 1 {
		t.Error("more than one process shown running the reaper")
	}
	_, body = f.get("/modules", cookie)
	for _, want := range []string{`host-old1 (pid 100) <span class="badge mod-up">up</span>`,
		`host-new1 (pid 100) <span class="badge mod-backoff">backoff</span>`} {
		if !strings.Contains(body, want) {
			t.Errorf("modules page lacks %q", want)
		}
	}
	if strings.Contains(body, "host-dead1") {
		t.Error("the modules page shows a gone process's state")
	}
}
