package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/egress"
	"github.com/switchboardhq/switchboard/internal/metrics"
	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/store"
)

// gateway is serve's capability-module gateway: the supervisor of the module
// processes, and the agent tool source that re-exposes their tools.
type gateway struct {
	sup *modules.Supervisor
	src *agent.Modules
	st  *store.Store
	log *slog.Logger
}

// loadManifests reads and validates the manifests in cfg.ModulesDir. Any invalid
// manifest is an error naming the file and the field: serve must not start on it,
// and it says so before it opens (or creates) the database. No modules dir, no
// manifests.
func loadManifests(cfg Config) ([]modules.Manifest, error) {
	if cfg.ModulesDir == "" {
		return nil, nil
	}
	if _, err := egress.Parse(cfg.EgressPolicy); err != nil {
		return nil, fmt.Errorf("--egress-policy: %w (see docs/egress.md)", err)
	}
	return modules.LoadDir(cfg.ModulesDir, modules.LoadOptions{EgressPolicy: cfg.EgressPolicy,
		ReservedTools: store.EveryVerb()})
}

// startGateway starts the modules of the manifests loadManifests returned. An
// include_tools entry a module does not advertise is an error naming the file and
// the field. A module that merely fails to come up is retried in the background.
// No modules dir, no gateway.
func startGateway(ctx context.Context, cfg Config, mans []modules.Manifest, st *store.Store, m *metrics.Metrics, logger *slog.Logger) (*gateway, error) {
	if cfg.ModulesDir == "" {
		return nil, nil
	}
	g := &gateway{st: st, log: logger}
	opts := modules.Options{
		Manifests:    mans,
		CallTimeout:  cfg.ModuleCallTimeout,
		Logger:       logger,
		EgressPolicy: cfg.EgressPolicy,
		Pins:         st,
		Version:      cfg.Version,
		Audit: func(action, target, detail string) {
			err := st.Audit(context.Background(), store.AuditEntry{Actor: "system", Action: action, Target: target, Detail: detail})
			if err != nil {
				logger.Error("audit module event", "action", action, "target", target, "err", err)
			}
		},
		// g.src exists before Start, the first time this can run.
		OnChange: func(module string) { g.src.Changed(module) },
	}
	if cfg.TweakModules != nil {
		cfg.TweakModules(&opts)
	}
	g.sup = modules.New(opts)
	g.src = agent.NewModules(g.sup, st, agent.ModuleOptions{
		Concurrency: cfg.ModuleConcurrency, Logger: logger, Observe: m.ObserveModules(g.sup.Status),
	})
	if err := g.sup.Start(ctx); err != nil {
		return nil, err
	}
	// `switchboard modules approve` pins from another process; reload when the
	// file changes so the approved tool comes back without a restart.
	st.OnForeignCommit(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := g.sup.ReloadPins(ctx); err != nil {
			logger.Warn("reload tool pins", "err", err)
		}
	})
	logger.Info("capability modules loaded", "dir", cfg.ModulesDir, "modules", len(mans))
	return g, nil
}

// sources is what agent.Options.ToolSources gets.
func (g *gateway) sources() []agent.ToolSource {
	if g == nil {
		return nil
	}
	return []agent.ToolSource{g.src}
}

// run refreshes agent sessions as module tools change, until ctx ends.
func (g *gateway) run(ctx context.Context, a *agent.Agent) {
	if g != nil {
		g.src.Run(ctx, a.RefreshGranted)
	}
}

// states are the modules' states, for this process's row in the processes
// table: the board shows each process's.
func (g *gateway) states() []store.ProcessModule {
	if g == nil {
		return nil
	}
	var out []store.ProcessModule
	for _, ms := range g.sup.Status() {
		out = append(out, store.ProcessModule{Name: ms.Name, State: string(ms.State), Error: ms.LastError})
	}
	return out
}

// restartAll restarts every module at once (serve's SIGHUP, systemctl reload):
// new executables and definitions are picked up without ending agents' sessions.
func (g *gateway) restartAll() {
	if g == nil {
		return
	}
	for _, ms := range g.sup.Status() {
		if err := g.sup.Restart(ms.Name); err != nil {
			g.log.Warn("restart module", "module", ms.Name, "err", err)
			continue
		}
		if err := g.st.Audit(context.Background(), store.AuditEntry{Actor: "system", Action: "module.restart",
			Target: "module:" + ms.Name, Detail: "SIGHUP"}); err != nil {
			g.log.Warn("audit a module restart", "module", ms.Name, "err", err)
		}
	}
}

// close stops every module and its process group.
func (g *gateway) close(ctx context.Context) {
	if g == nil {
		return
	}
	if err := g.sup.Close(ctx); err != nil {
		g.log.Warn("modules did not stop politely in time; killed", "err", err)
	}
	// Calls waiting for their agent's answer end with their module; their
	// audit must land before the store closes.
	if err := g.src.Wait(ctx); err != nil {
		g.log.Warn("module calls still running at shutdown; their audit may be lost", "err", err)
	}
}

// readiness reports every module for /readyz, and whether all granted ones (a
// capability at least one live endpoint holds) are up.
func (g *gateway) readiness(ctx context.Context, st *store.Store) (views []ModuleView, ready bool, err error) {
	if g == nil {
		return nil, true, nil
	}
	granted, err := GrantedCapabilities(ctx, st)
	if err != nil {
		return nil, false, err
	}
	ready = true
	for _, ms := range g.sup.Status() {
		v := NewModuleView(ms, granted[ms.Name])
		if v.Granted && v.State != modules.StateUp {
			ready = false
		}
		views = append(views, v)
	}
	return views, ready, nil
}

// GrantedCapabilities are the capabilities at least one live endpoint holds.
func GrantedCapabilities(ctx context.Context, st *store.Store) (map[string]bool, error) {
	eps, err := st.ListEndpoints(ctx, false)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, ep := range eps {
		for _, c := range ep.Capabilities {
			out[c] = true
		}
	}
	return out, nil
}
