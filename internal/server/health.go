package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/store"
)

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}

// readyz answers 200 when the database answers and every granted module is up,
// else 503, with a JSON body that says which part is not and how each module is.
// The detail (module names, pids, tool names, errors) goes only to the addresses
// that may read /metrics; anyone else (a load balancer's probe) gets the verdict.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
	defer cancel()
	status := map[string]any{"database": "ok"}
	code := http.StatusOK
	if err := s.store.Ping(ctx); err != nil {
		status["database"] = err.Error()
		code = http.StatusServiceUnavailable
	} else if t := s.store.WriteTrouble(); t != nil {
		status["database"] = t.String()
		code = http.StatusServiceUnavailable
	}
	views, modulesReady, err := s.modules.readiness(ctx, s.store)
	if views != nil {
		status["modules"] = views
	}
	if err != nil || !modulesReady {
		code = http.StatusServiceUnavailable
	}
	status["ready"] = code == http.StatusOK
	if !s.metrics.Allowed(r) {
		status = map[string]any{"ready": code == http.StatusOK, "detail": readyzWithheld}
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(status)
}

// readyzWithheld is /readyz's answer in place of the detail to an address outside
// --metrics-allow.
const readyzWithheld = "database and module detail is served only to --metrics-allow addresses"

// StatusLine is what `systemctl status` shows: the queue at a glance.
func (s *Server) StatusLine(ctx context.Context) string {
	counts, err := s.store.QueueCounts(ctx)
	if err != nil {
		return "database not answering: " + err.Error()
	}
	queues := map[string]bool{}
	byState := map[string]int64{}
	for _, c := range counts {
		queues[c.Queue] = true
		byState[c.State] += c.Count
	}
	line := fmt.Sprintf("%d queues, %d pending, %d claimed, %d failed",
		len(queues), byState[store.StatePending], byState[store.StateClaimed], byState[store.StateFailed])
	if s.modules != nil {
		up, all := 0, s.modules.sup.Status()
		for _, m := range all {
			if m.State == modules.StateUp {
				up++
			}
		}
		line += fmt.Sprintf(", modules %d/%d up", up, len(all))
	}
	if t := s.store.WriteTrouble(); t != nil {
		line = "WRITES FAILING since " + t.Since.Format(time.TimeOnly) + ": " + t.Err + "; " + line
	}
	return line
}

// ModuleView is one module as /readyz and `modules list` show it: its status
// without the last stderr lines (which /readyz would publish to anyone who can
// reach it), and whether a live endpoint is granted it.
type ModuleView struct {
	modules.ModuleStatus
	Granted bool `json:"granted"`
}

// NewModuleView is ms as /readyz shows it.
func NewModuleView(ms modules.ModuleStatus, granted bool) ModuleView {
	ms.Stderr = nil
	return ModuleView{ModuleStatus: ms, Granted: granted}
}
