package web

import (
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// The Processes page lists the serve processes on this database (several on
// one PostgreSQL database make a fleet; on SQLite there is one) from their rows
// in the processes table: which are alive, which version each runs (during an
// upgrade a fleet runs two), and which one runs the reaper.

// processView is one process as the Processes page shows it.
type processView struct {
	store.Process
	Alive bool
	Leads bool
}

type processesPage struct {
	Processes []processView
	Versions  []string // of the live processes: more than one during an upgrade
}

// liveProcesses lists the processes, alive or not: a process is alive while its
// heartbeat is younger than three of Options.Heartbeat.
func (u *UI) liveProcesses(r *http.Request) ([]processView, error) {
	list, err := u.store.ListProcesses(r.Context())
	if err != nil {
		return nil, err
	}
	now := u.now()
	out := make([]processView, len(list))
	for i, p := range list {
		out[i] = processView{Process: p, Alive: now.Sub(p.HeartbeatAt) < 3*u.opts.Heartbeat,
			Leads: slices.Contains(p.Roles, store.RoleReaper)}
	}
	return out, nil
}

// processesPage serves GET /processes.
func (u *UI) processesPage(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	list, err := u.liveProcesses(r)
	if err != nil {
		u.fail(w, r, rc, http.StatusInternalServerError, "The processes could not be read; the server log has the details.")
		u.log.Error("web: list processes", "err", err)
		return
	}
	p := processesPage{Processes: list}
	for _, v := range list {
		if v.Alive && !slices.Contains(p.Versions, v.Version) {
			p.Versions = append(p.Versions, v.Version)
		}
	}
	slices.Sort(p.Versions)
	u.render(w, r, rc, http.StatusOK, "processes", view{Title: "Processes", Nav: "processes", Page: p})
}

// otherLiveProcesses is how many live serve processes there are besides this
// one (a fleet on one PostgreSQL database); 0 if they cannot be read.
func (u *UI) otherLiveProcesses(r *http.Request) int {
	list, err := u.liveProcesses(r)
	if err != nil {
		u.log.Warn("web: count the fleet's other processes for a page that shows this one's counts", "err", err)
		return 0
	}
	n := 0
	for _, p := range list {
		if p.Alive {
			n++
		}
	}
	return max(n-1, 0)
}

// moduleElsewhere is a module's state in one live process, for the Modules page.
type moduleElsewhere struct {
	Where string // host and pid
	State string
	Error string
}

// modulesInFleet maps each module to its state in every live process, when more
// than one runs; nil otherwise (the page then shows this process's alone).
func (u *UI) modulesInFleet(r *http.Request) map[string][]moduleElsewhere {
	list, err := u.liveProcesses(r)
	if err != nil {
		u.log.Warn("web: list processes for the Modules page", "err", err)
		return nil
	}
	list = slices.DeleteFunc(list, func(p processView) bool { return !p.Alive })
	if len(list) < 2 {
		return nil
	}
	out := map[string][]moduleElsewhere{}
	for _, p := range list {
		for _, m := range p.Modules {
			out[m.Name] = append(out[m.Name], moduleElsewhere{Where: fmt.Sprintf("%s (pid %d)", p.Host, p.PID),
				State: m.State, Error: m.Error})
		}
	}
	return out
}

// defaultHeartbeat is how often processes are taken to beat when Options does
// not say (serve on SQLite beats this often).
const defaultHeartbeat = 30 * time.Second
