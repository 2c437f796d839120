package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/switchboardhq/switchboard/internal/linediff"
	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/store"
)

// Modules is what the board needs from the capability-module supervisor
// (*modules.Supervisor): what each module is doing, approving a tool whose
// definition changed since it was pinned, and restarting a module.
type Modules interface {
	Status() []modules.ModuleStatus
	Approve(ctx context.Context, module, tool, hash string) error
	Restart(module string) error
}

type modulesPage struct {
	Configured bool
	Modules    []modules.ModuleStatus
	Fleet      map[string][]moduleElsewhere // each module's state in every live process, when several run
}

// modulesPage serves GET /modules.
func (u *UI) modulesPage(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	p := modulesPage{Configured: u.opts.Modules != nil}
	if p.Configured {
		p.Modules = u.opts.Modules.Status()
		p.Fleet = u.modulesInFleet(r)
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
	// hash is the definition the page showed: a module that redefines the tool
	// after the human looked does not get the newer one approved.
	hash := strings.TrimSpace(r.PostForm.Get("hash"))
	if hash == "" {
		u.fail(w, r, rc, http.StatusBadRequest, "Say which definition you reviewed: reload the Modules page and approve from there.")
		return
	}
	wasNew := false
	for _, m := range u.opts.Modules.Status() {
		for _, t := range m.Tools {
			if m.Name == module && (t.Name == tool || t.Upstream == tool) {
				wasNew = t.New
			}
		}
	}
	err := u.opts.Modules.Approve(r.Context(), module, tool, hash)
	if errors.Is(err, modules.ErrDefinitionChanged) {
		u.fail(w, r, rc, http.StatusConflict, fmt.Sprintf("Nothing was approved: the definition you approved is not the one %s has now. It changed after the page was shown; review the definition shown now.", tool))
		return
	}
	if err != nil {
		u.log.Warn("web: approve module tool", "module", module, "tool", tool, "err", err)
		u.fail(w, r, rc, http.StatusBadRequest, fmt.Sprintf("Approving %s of module %s failed: %v.", tool, module, err))
		return
	}
	// The supervisor audits the pin; this row records which human decided it.
	if err := u.store.Audit(r.Context(), store.AuditEntry{Actor: rc.actor(), Action: "module.approve",
		Target: "module:" + module, Detail: "tool=" + tool + " sha256=" + hash}); err != nil {
		u.log.Warn("web: audit module approval", "err", err)
	}
	if wasNew {
		u.redirectFlash(w, r, rc, "/modules", "approved-new")
		return
	}
	u.redirectFlash(w, r, rc, "/modules", "approved")
}

// restartModule serves POST /modules/:module/restart: the module is stopped and
// started again at once, its backoff forgotten (a new executable, a cause of its
// crashes mended).
func (u *UI) restartModule(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	if u.opts.Modules == nil {
		u.fail(w, r, rc, http.StatusNotFound, "No capability modules are configured.")
		return
	}
	module := rc.Params.ByName("module")
	if err := u.opts.Modules.Restart(module); err != nil {
		u.fail(w, r, rc, http.StatusNotFound, fmt.Sprintf("No module is named %q.", module))
		return
	}
	if err := u.store.Audit(r.Context(), store.AuditEntry{Actor: rc.actor(), Action: "module.restart",
		Target: "module:" + module}); err != nil {
		u.log.Warn("web: audit module restart", "err", err)
	}
	u.redirectFlash(w, r, rc, "/modules", "restarted")
}

// diffLine is one line of a withheld tool's "what changed", with its class on
// the page: "del", "ins", "same" or "skip".
type diffLine struct{ Class, Text string }

var diffClass = map[linediff.Op]string{linediff.Removed: "del", linediff.Added: "ins", linediff.Same: "same", linediff.Skipped: "skip"}

// definitionDiff is a withheld tool's Changes as the page shows them. It is empty
// when nothing differs line by line.
func definitionDiff(t modules.ToolStatus) []diffLine {
	var out []diffLine
	for _, l := range t.Changes() {
		out = append(out, diffLine{Class: diffClass[l.Op], Text: l.String()})
	}
	return out
}

// The supervisor is what serve wires in.
var _ Modules = (*modules.Supervisor)(nil)
