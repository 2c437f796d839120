package web

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// Modules is what the board needs from the capability-module supervisor: what each
// module is doing, and approving a tool whose definition changed since it was pinned.
type Modules interface {
	Status() []ModuleStatus
	Approve(ctx context.Context, module, tool string) error
}

// ModuleStatus is one module's state as the Modules page shows it.
type ModuleStatus struct {
	Name         string
	Title        string
	State        string // starting, up, backoff, stopped
	PID          int
	Restarts     int
	UpSince      time.Time
	NextAttempt  time.Time
	LastExit     *ModuleExit
	LastError    string
	Stderr       []string // last lines, oldest first
	Tools        []ModuleTool
	MissingTools []string
}

// ModuleExit is how a module's process last ended.
type ModuleExit struct {
	Code   int
	Signal string
	Time   time.Time
}

func (e ModuleExit) String() string {
	if e.Signal != "" {
		return "killed by " + e.Signal
	}
	return fmt.Sprintf("exited with code %d", e.Code)
}

// ModuleTool is one tool's pin state: Withheld when its definition changed since a
// human last approved it.
type ModuleTool struct {
	Name     string
	Upstream string
	Hash     string
	Withheld bool
}

type modulesPage struct {
	Configured bool
	Modules    []ModuleStatus
}

// modulesPage serves GET /modules.
func (u *UI) modulesPage(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	p := modulesPage{Configured: u.opts.Modules != nil}
	if p.Configured {
		p.Modules = u.opts.Modules.Status()
	}
	u.render(w, r, rc, http.StatusOK, "modules", view{Title: "Modules", Nav: "modules", Page: p})
}

// approveTool serves POST /modules/:module/approve (form field tool): pin the tool's
// current definition so agents can call it again.
func (u *UI) approveTool(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	if u.opts.Modules == nil {
		u.fail(w, r, rc, http.StatusNotFound, "No capability modules are configured.")
		return
	}
	module, tool := rc.Params.ByName("module"), strings.TrimSpace(r.PostForm.Get("tool"))
	if tool == "" {
		u.fail(w, r, rc, http.StatusBadRequest, "Say which tool to approve.")
		return
	}
	if err := u.opts.Modules.Approve(r.Context(), module, tool); err != nil {
		u.log.Warn("web: approve module tool", "module", module, "tool", tool, "err", err)
		u.fail(w, r, rc, http.StatusBadRequest, fmt.Sprintf("Approving %s of module %s failed: %v.", tool, module, err))
		return
	}
	// The supervisor audits the pin; this row records which human decided it.
	if err := u.store.Audit(r.Context(), store.AuditEntry{Actor: rc.actor(), Action: "module.approve",
		Target: "module:" + module, Detail: "tool=" + tool}); err != nil {
		u.log.Warn("web: audit module approval", "err", err)
	}
	http.Redirect(w, r, "/modules?flash=approved", http.StatusSeeOther)
}
