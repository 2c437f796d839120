package modules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// State is a module's lifecycle state.
type State string

const (
	StateStarting State = "starting" // process started, initializing
	StateUp       State = "up"       // serving its tools
	StateBackoff  State = "backoff"  // down, waiting to retry
	StateStopped  State = "stopped"  // not started, or shut down
)

// Restart backoff: 5 s doubling to 5 min. A module that stayed up for
// backoffMax starts over at backoffMin when it next fails.
const (
	backoffMin = 5 * time.Second
	backoffMax = 5 * time.Minute
)

func backoffDelay(failures int) time.Duration {
	d := backoffMin
	for i := 0; i < failures && d < backoffMax; i++ {
		d *= 2
	}
	return min(d, backoffMax)
}

// ErrUnknownModule means no manifest defines the named module.
var ErrUnknownModule = errors.New("modules: unknown module")

// ErrDefinitionChanged means an approval named a definition (by its hash) that is
// no longer the tool's current one: the module redefined it after the human
// looked, and the new definition needs reviewing in turn.
var ErrDefinitionChanged = errors.New("modules: the tool's definition changed since it was shown")

// Options configure a Supervisor. Zero values take the defaults noted.
type Options struct {
	Manifests []Manifest
	Logger    *slog.Logger     // default slog.Default()
	Now       func() time.Time // default time.Now
	// After waits out a restart backoff; tests replace it so no test waits
	// real seconds. Default time.After.
	After func(time.Duration) <-chan time.Time
	// EgressPolicy is the serialized global egress policy passed to modules
	// as SWITCHBOARD_MODULE_EGRESS_POLICY; "" when none is configured.
	EgressPolicy string
	LookupEnv    func(string) (string, bool) // default os.LookupEnv
	Pins         PinStore                    // default NewMemoryPins()
	// Audit records pin events (first pin, withheld, approved). May be nil.
	Audit func(action, target, detail string)
	// OnChange is called, outside any lock, whenever a module's tools or
	// their availability change; agents then re-read Tools() and send
	// notifications/tools/list_changed. It must not block for long. May be nil.
	OnChange func(module string)

	StartTimeout time.Duration // one start attempt: initialize + tools/list; default 30s
	StartNotice  time.Duration // Start logs the modules it still waits for after this; default 3s
	StopGrace    time.Duration // each polite shutdown step; default 2s
	CallTimeout  time.Duration // when the caller's ctx has no deadline; default 5m
	// StdinStall bounds one write to a module's stdin; default 30s. A module
	// that leaves its input unread that long (64 KiB waiting in the pipe) is
	// wedged: it is killed and restarted, which frees every call queued behind
	// the write, instead of holding them (and shutdown) forever.
	StdinStall time.Duration
	// RelistGap is the least time between two re-listings of one module's
	// tools after it announces changes; default 1s.
	RelistGap   time.Duration
	StderrLines int    // stderr lines kept for status; default 20
	Version     string // clientInfo.version announced to modules
}

func (o *Options) defaults() {
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	if o.Pins == nil {
		o.Pins = NewMemoryPins()
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.StartNotice <= 0 {
		o.StartNotice = 3 * time.Second
	}
	if o.StopGrace <= 0 {
		o.StopGrace = 2 * time.Second
	}
	if o.StdinStall <= 0 {
		o.StdinStall = 30 * time.Second
	}
	if o.RelistGap <= 0 {
		o.RelistGap = time.Second
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = 5 * time.Minute
	}
	if o.StderrLines <= 0 {
		o.StderrLines = 20
	}
	if o.Version == "" {
		o.Version = "dev"
	}
}

func (o *Options) loadOptions() LoadOptions {
	return LoadOptions{LookupEnv: o.LookupEnv, EgressPolicy: o.EgressPolicy}
}

// Supervisor starts, watches and restarts modules, and holds their tool
// catalog. One Supervisor serves every agent session: each module has
// exactly one process and one MCP session.
type Supervisor struct {
	opts   Options
	mods   []*module
	byName map[string]*module
	wg     sync.WaitGroup

	mu       sync.Mutex
	started  bool
	closed   bool
	cancel   context.CancelFunc
	closeCtx context.Context
}

// New returns a Supervisor for opts.Manifests; nothing runs until Start.
func New(opts Options) *Supervisor {
	opts.defaults()
	s := &Supervisor{opts: opts, byName: map[string]*module{}, closeCtx: context.Background()}
	for _, man := range opts.Manifests {
		m := &module{
			sup: s, man: man, state: StateStopped,
			log:     opts.Logger.With("module", man.Name),
			stderr:  newLineRing(opts.StderrLines),
			refresh: make(chan struct{}, 1),
			restart: make(chan struct{}, 1),
		}
		m.changes.Every, m.refusals.Every, m.reports.times.Every = time.Minute, time.Minute, withheldReportEvery
		s.mods = append(s.mods, m)
		s.byName[man.Name] = m
	}
	return s
}

// Start validates every manifest and makes one start attempt per module,
// concurrently. A validation or tool-selection failure (an include_tools
// entry the module does not advertise) stops everything and returns the
// error: serve must not start. A module that merely fails to start or
// initialize is left retrying in the background with backoff while the rest
// serve. ctx bounds the initial attempts only.
func (s *Supervisor) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started || s.closed {
		s.mu.Unlock()
		return errors.New("modules: supervisor already started")
	}
	s.started = true
	runCtx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	// Close waits for Start too, so no process outlives a Close that races
	// the initial attempts.
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()

	if err := checkManifests(s.opts.Manifests, s.opts.loadOptions()); err != nil {
		cancel()
		return err
	}
	for _, m := range s.mods {
		if err := m.seed(ctx); err != nil {
			m.log.Warn("module tools not read from their pins; until the module is up they are not listed", "err", err)
		}
	}
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	context.AfterFunc(runCtx, stop)
	first := make([]error, len(s.mods))
	var wg sync.WaitGroup
	started := make([]atomic.Bool, len(s.mods)) // once a module's first attempt ended
	for i, m := range s.mods {
		wg.Go(func() {
			first[i] = m.start(ctx, true)
			started[i].Store(true)
		})
	}
	// serve listens only after every module's first attempt: say who it waits
	// for, rather than look hung for up to StartTimeout.
	slow := time.AfterFunc(s.opts.StartNotice, func() {
		for i, m := range s.mods {
			if !started[i].Load() {
				m.log.Info("still waiting for the module to answer initialize and tools/list; serve starts without it after the start timeout",
					"start_timeout", s.opts.StartTimeout.String())
			}
		}
	})
	wg.Wait()
	slow.Stop()
	var fatal []error
	for i, err := range first {
		var sel *selectionError
		if errors.As(err, &sel) {
			fatal = append(fatal, err)
		} else if err != nil {
			s.mods[i].log.Warn("module unavailable at start-up; will retry", "err", err)
		}
	}
	if len(fatal) > 0 {
		cancel()
		for _, m := range s.mods {
			m.shutdown(context.Background())
		}
		return errors.Join(fatal...)
	}
	for i, m := range s.mods {
		s.wg.Add(1)
		go m.run(runCtx, first[i])
	}
	return nil
}

// checkManifests re-validates manifests handed to New (they may not come
// from LoadDir) and refuses module names that would make tool names
// ambiguous.
func checkManifests(ms []Manifest, opts LoadOptions) error {
	for i, m := range ms {
		if err := m.Validate(opts); err != nil {
			return err
		}
		for _, other := range ms[:i] {
			if err := nameConflict(other, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// nameConflict refuses a duplicate name, and names where one plus "_" is a
// prefix of the other ("git" and "git_hub"): "git_hub_x" would then name
// two different tools.
func nameConflict(prev, m Manifest) error {
	switch {
	case prev.Name == m.Name:
		return fieldErr(m.File, "name", "module %q is already defined in %s", m.Name, prev.File)
	case strings.HasPrefix(m.Name, prev.Name+"_"), strings.HasPrefix(prev.Name, m.Name+"_"):
		return fieldErr(m.File, "name", "module %q and module %q (%s) would give tools ambiguous prefixed names", m.Name, prev.Name, prev.File)
	}
	return nil
}

// Close shuts every module down: close stdin, wait, SIGTERM the process
// group, wait, SIGKILL it. When ctx ends first the polite steps are skipped.
func (s *Supervisor) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.closeCtx = ctx
	cancel := s.cancel
	s.mu.Unlock()
	if cancel == nil {
		return nil
	}
	cancel()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		// A runner may be stuck on a module that stopped reading (see
		// guardedStdin); killing every module ends that at once.
		s.killAll()
		<-done
		return fmt.Errorf("modules: close: %w", ctx.Err())
	}
}

// killAll kills every module's process group.
func (s *Supervisor) killAll() {
	for _, m := range s.mods {
		m.mu.RLock()
		p := m.proc
		m.mu.RUnlock()
		if p != nil {
			p.kill()
		}
	}
}

func (s *Supervisor) shutdownCtx() context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closeCtx
}

func (s *Supervisor) changed(module string) {
	if s.opts.OnChange != nil {
		s.opts.OnChange(module)
	}
}

func (s *Supervisor) audit(action, target, detail string) {
	if s.opts.Audit != nil {
		s.opts.Audit(action, target, detail)
	}
}

// Tools returns the last known tools of every module, ordered by module and
// name. Agents expose only the Available ones.
func (s *Supervisor) Tools() []Tool {
	var out []Tool
	for _, m := range s.mods {
		m.mu.RLock()
		up := m.state == StateUp && m.sess != nil
		for _, t := range m.tools {
			out = append(out, Tool{
				Name: t.Name, Module: m.man.Name, Upstream: t.Upstream, Definition: t.Def,
				Hash: t.Hash, Available: up && !t.Withheld, Withheld: t.Withheld, HasOutputSchema: t.Output,
			})
		}
		m.mu.RUnlock()
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Module != out[j].Module {
			return out[i].Module < out[j].Module
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// Call forwards a tools/call for the exposed tool name over the module's
// shared session and returns the module's result JSON unchanged (including
// results with isError). It fails at once with ErrUnavailable when the
// module is down, ErrWithheld when the tool awaits approval, ErrUnknownTool
// when no module has it, and before all of these with ErrArguments when args
// are not a JSON object; a JSON-RPC error from the module is an *RPCError.
// ctx bounds the call; without a deadline Options.CallTimeout applies.
func (s *Supervisor) Call(ctx context.Context, tool string, args json.RawMessage) (json.RawMessage, error) {
	if err := CheckArguments(args); err != nil {
		return nil, fmt.Errorf("%w: %q", err, tool)
	}
	m := s.moduleOf(tool)
	if m == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTool, tool)
	}
	m.mu.RLock()
	sess := m.sess
	var entry *toolEntry
	for i := range m.tools {
		if m.tools[i].Name == tool {
			entry = &m.tools[i]
			break
		}
	}
	var upstream string
	withheld := false
	if entry != nil {
		upstream, withheld = entry.Upstream, entry.Withheld
	}
	m.mu.RUnlock()
	switch {
	case entry == nil && sess == nil:
		// Not known yet (never listed) and not up: say unavailable, the
		// truthful answer for a tool of a module that has not come up.
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, m.man.Name)
	case entry == nil:
		return nil, fmt.Errorf("%w: %q", ErrUnknownTool, tool)
	case withheld:
		return nil, fmt.Errorf("%w: %q", ErrWithheld, tool)
	case sess == nil:
		return nil, fmt.Errorf("%w: %s", ErrUnavailable, m.man.Name)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.opts.CallTimeout)
		defer cancel()
	}
	return sess.callTool(ctx, upstream, args)
}

func (s *Supervisor) moduleOf(tool string) *module {
	for _, m := range s.mods {
		if strings.HasPrefix(tool, m.man.Name+"_") {
			return m
		}
	}
	return nil
}

// Restart stops module (its process given the same grace as at shutdown) and
// starts it again at once, with its backoff forgotten: for a new executable or
// definitions, or a module in a long backoff whose cause is mended. A manifest's
// changes need serve restarted. It returns at once; Status shows the outcome.
// The caller audits who asked.
func (s *Supervisor) Restart(module string) error {
	m := s.byName[module]
	if m == nil {
		return fmt.Errorf("modules: restart: %w: %q", ErrUnknownModule, module)
	}
	select {
	case m.restart <- struct{}{}:
	default: // one is asked for already
	}
	m.log.Info("restart asked for")
	return nil
}

// Approve pins the current definition of a withheld tool (exposed or
// upstream name) so it becomes available again, and audits the approval. hash, when
// not empty, is the definition the human reviewed (its SHA-256 as Status shows
// it): if the module has redefined the tool since, nothing is pinned and the
// error is ErrDefinitionChanged.
func (s *Supervisor) Approve(ctx context.Context, module, tool, hash string) error {
	m := s.byName[module]
	if m == nil {
		return fmt.Errorf("modules: approve: %w: %q", ErrUnknownModule, module)
	}
	m.mu.RLock()
	var name, current string
	var def json.RawMessage
	for _, t := range m.tools {
		if t.Name == tool || t.Name == exposedName(module, tool) {
			name, current, def = t.Name, t.Hash, t.Def
			break
		}
	}
	m.mu.RUnlock()
	if name == "" {
		return fmt.Errorf("modules: approve %s %s: %w", module, tool, ErrUnknownTool)
	}
	if hash != "" && !strings.EqualFold(hash, current) {
		return fmt.Errorf("modules: approve %s %s: sha256 %.12s was shown, the definition is now %.12s: %w",
			module, name, hash, current, ErrDefinitionChanged)
	}
	hash = current
	if err := s.opts.Pins.PinTool(ctx, module, name, hash, keptDefinition(def)); err != nil {
		return fmt.Errorf("modules: approve %s %s: %w", module, name, err)
	}
	released := m.release(map[string]string{name: hash})
	s.audit("module.tool_approved", module+"/"+name, "sha256 "+hash)
	m.log.Info("tool definition approved", "tool", name, "sha256", hash)
	if released {
		s.changed(module)
	}
	return nil
}

// ReloadPins re-reads pins from the PinStore and releases withheld tools
// whose current definition has since been approved elsewhere (the CLI
// writing to the same database). Call it when the store changed.
func (s *Supervisor) ReloadPins(ctx context.Context) error {
	for _, m := range s.mods {
		pins, err := s.opts.Pins.ToolPins(ctx, m.man.Name)
		if err != nil {
			return fmt.Errorf("modules: reload pins for %s: %w", m.man.Name, err)
		}
		if m.release(pins) {
			s.changed(m.man.Name)
		}
	}
	return nil
}
