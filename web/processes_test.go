package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/agent"
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

// An MCP session lives in the process that opened it, and the Endpoints page
// shows the sessions of the process serving it: in a fleet it says so, or an
// agent working through another process reads as "no session" here.
func TestEndpointListSaysItsSessionsAreThisProcesss(t *testing.T) {
	f := newFixture(t, Options{Heartbeat: 2 * time.Second})
	ag, err := agent.New(f.st, agent.Options{Logger: quietLog, Now: f.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	f.ui.opts.Agents = ag
	if _, _, err := f.st.CreateEndpoint(t.Context(), "worker", endpointSpec([]string{"inbox"}), "test"); err != nil {
		t.Fatal(err)
	}
	cookie, _ := f.login()
	const note = "Sessions and requests are this process"
	f.liveProcess("here")
	if _, body := f.get("/endpoints", cookie); strings.Contains(body, note) {
		t.Error("one process: the page speaks of others")
	}
	f.liveProcess("there")
	if _, body := f.get("/endpoints", cookie); !strings.Contains(body, note) || !strings.Contains(body, "the 1 other serve process") {
		t.Errorf("two live processes: the page does not say whose sessions it shows")
	}
}

// liveProcess writes the row and a heartbeat of a live serve process id.
func (f *fixture) liveProcess(id string) {
	f.t.Helper()
	ctx := context.Background()
	err := f.st.RegisterProcess(ctx, store.Process{ID: id, Host: "host-" + id, PID: 100, Version: "v1", StartedAt: f.clock.Now()})
	if err == nil {
		_, err = f.st.ProcessBeat(ctx, id, store.Beat{})
	}
	if err != nil {
		f.t.Fatal(err)
	}
}

// Refused deliveries are counted by the process that refused them, since its
// start-up: in a fleet the Webhooks pages say the count is the serving
// process's, or a webhook another process refuses reads as 0 refused here.
func TestWebhookPagesSayTheirRefusalsAreThisProcesss(t *testing.T) {
	f := newFixture(t, Options{Failures: fakeFailures{1: 7}, Heartbeat: 2 * time.Second})
	cookie, _ := f.login()
	h, _ := f.webhookWithEvents()
	pages := []string{"/webhooks", fmt.Sprintf("/webhook/%d", h.ID)}
	f.liveProcess("here")
	for _, page := range pages {
		if _, body := f.get(page, cookie); strings.Contains(body, "on this process") {
			t.Errorf("%s, one process: it speaks of others", page)
		}
	}
	f.liveProcess("there")
	for _, page := range pages {
		if _, body := f.get(page, cookie); !strings.Contains(body, "on this process") {
			t.Errorf("%s, two live processes: it does not say whose refusals it counts", page)
		}
	}
}
