package modules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard/internal/logevery"
)

// selectionError marks a start failure that is a configuration error (an
// include_tools entry the module does not advertise): at gateway start-up it
// is fatal rather than retried.
type selectionError struct{ err error }

func (e *selectionError) Error() string { return e.err.Error() }
func (e *selectionError) Unwrap() error { return e.err }

// module is the supervised state of one manifest.
type module struct {
	sup      *Supervisor
	man      Manifest
	log      *slog.Logger
	stderr   *lineRing
	refresh  chan struct{} // tools/list_changed from the module; coalesced
	restart  chan struct{} // a restart asked for (Supervisor.Restart); coalesced
	reports  withheldReports
	changes  logevery.Counter[struct{}] // "module tools changed" lines: the first, then one a minute
	refusals logevery.Counter[struct{}] // "module tools refused" lines, likewise

	mu          sync.RWMutex
	state       State
	sess        upstream // non-nil only while up
	proc        *process // non-nil from process start until clean-up
	attempts    int
	upSince     time.Time
	nextAttempt time.Time
	lastExit    *Exit
	lastErr     string
	tools       []toolEntry   // last known catalog, kept while down
	refused     []RefusedTool // the first maxRefusedShown of the last listing's refusals
	refusedMore int           // and how many more there were
	missing     []string
}

// upstream is a capability's connection while it is up: a module's MCP
// session over stdio, or a rest capability's HTTP client and operations.
type upstream interface {
	listTools(ctx context.Context) (tools []upstreamTool, refused []RefusedTool, refusedNames []string, nameless int, err error)
	callTool(ctx context.Context, upstream string, args json.RawMessage) (json.RawMessage, error)
	brokenReason() error   // why it broke, nil while it works
	done() <-chan struct{} // closed when it broke
	close()
}

// run supervises the module until ctx ends: serve while up, and after any
// failure wait out the backoff and start again.
func (m *module) run(ctx context.Context, err error) {
	defer m.sup.wg.Done()
	now := m.sup.opts.Now
	failures := 0
	for {
		if err == nil {
			upSince := now()
			err = m.serve(ctx)
			if ctx.Err() != nil {
				return
			}
			if now().Sub(upSince) >= backoffMax {
				failures = 0
			}
		}
		if errors.Is(err, errRestart) {
			failures = 0 // asked for: no failure, no wait
		} else {
			delay := backoffDelay(failures)
			failures++
			m.mu.Lock()
			// The error may carry the module's own text (a JSON-RPC error message).
			m.state, m.nextAttempt, m.lastErr = StateBackoff, now().Add(delay), shownText(err.Error(), maxShownError)
			m.mu.Unlock()
			m.log.Warn("module down; restarting after backoff", "err", err, "backoff", delay)
			select {
			case <-m.sup.opts.After(delay):
			case <-m.restart:
				failures = 0
			case <-ctx.Done():
				m.setState(StateStopped)
				return
			}
		}
		err = m.start(ctx, false)
		if err != nil && ctx.Err() != nil {
			m.setState(StateStopped)
			return
		}
	}
}

// errRestart ends serve when a restart was asked for.
var errRestart = errors.New("modules: restart asked for")

func (m *module) setState(s State) {
	m.mu.Lock()
	m.state = s
	m.mu.Unlock()
}

// start makes one start attempt: validate, spawn, initialize, list, select,
// pin. strict makes a missing include_tools entry a selectionError.
func (m *module) start(ctx context.Context, strict bool) error {
	o := &m.sup.opts
	m.mu.Lock()
	// The last attempt's error is the last attempt's: a start under way (a
	// restart asked for, say) shows none until it fails too.
	m.state, m.nextAttempt, m.lastErr = StateStarting, time.Time{}, ""
	m.attempts++
	m.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := m.man.Validate(o.loadOptions()); err != nil {
		return err
	}
	switch m.man.Type {
	case TypeREST:
		return m.startREST(ctx)
	case TypeRemote:
		return m.startRemote(ctx, strict)
	}
	// The last lines span runs: each run's begin with a line that says so.
	m.stderr.add("── started " + o.Now().UTC().Format("2006-01-02 15:04:05") + " UTC ──")
	proc, err := startProcess(m.man, m.man.childEnv(o.LookupEnv, o.EgressPolicy), m.log, m.stderr, o.Now)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.proc = proc
	m.mu.Unlock()
	m.log.Info("module started", "pid", proc.pid)

	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	stdin := &guardedStdin{f: proc.stdin, stall: o.StdinStall, onStall: func() {
		m.log.Warn("module left its stdin unread; killing it", "stall", o.StdinStall.String(), "pid", proc.pid)
		proc.kill()
	}}
	// Its MCP log messages join its stderr's last lines on the board (escaped,
	// cut as stderr's are), not the journal, which a chatty module would flood.
	onLog := func(line string) { m.stderr.add(shownText(line, maxStderrLine)) }
	sess, err := openSession(ctx, proc.stdout, stdin, o.Version, m.requestRefresh, onLog)
	var l listing
	if err == nil {
		l, err = m.catalog(ctx, sess)
		if err == nil {
			err = m.checkMissing(l, strict)
		}
		if err != nil {
			sess.close()
		}
	}
	if err != nil {
		m.cleanup(ctx, proc)
		return fmt.Errorf("modules: %s: start: %w (process %s)", m.man.Name, err, proc.exit)
	}
	m.up(sess, l, "pid", proc.pid)
	return nil
}

// checkMissing refuses a listing that lacks include_tools entries; strict
// makes that a selectionError (fatal at gateway start-up).
func (m *module) checkMissing(l listing, strict bool) error {
	if len(l.missing) == 0 {
		return nil
	}
	err := fieldErr(m.man.File, "include_tools", "module does not advertise %q", l.missing)
	if strict {
		return &selectionError{err}
	}
	return err
}

// up puts a started connection in service with its listing.
func (m *module) up(sess upstream, l listing, logArgs ...any) {
	m.mu.Lock()
	m.state, m.sess, m.upSince, m.lastErr = StateUp, sess, m.sup.opts.Now(), ""
	m.tools, m.missing = l.tools, l.missing
	refusedChanged := m.setRefused(l)
	m.mu.Unlock()
	m.log.Info("module up", append(logArgs, "tools", len(l.tools))...)
	if refusedChanged {
		m.logRefused(l)
	}
	m.sup.changed(m.man.Name)
}

// listing is one reading of a module's tools: those it serves, those refused,
// and include_tools entries it does not advertise.
type listing struct {
	tools     []toolEntry
	refused   []RefusedTool
	uncounted int // refusals past those in refused, counted but not kept
	missing   []string
}

// catalog lists the module's tools, selects and pins them.
func (m *module) catalog(ctx context.Context, sess upstream) (listing, error) {
	listed, refused, refusedNames, nameless, err := sess.listTools(ctx)
	if err != nil {
		if reason := sess.brokenReason(); reason != nil {
			err = fmt.Errorf("%w (%v)", err, reason)
		}
		return listing{}, err
	}
	var l listing
	l.tools, l.refused, l.missing = selectTools(m.man, listed)
	if m.man.IncludeTools != nil {
		// The manifest selects by name: what the listing refused is shown only if
		// selected, and a selected tool refused there is refused, not missing.
		selected := map[string]bool{}
		for _, n := range m.man.IncludeTools {
			selected[n] = true
		}
		kept, refusedSet := refused[:0], map[string]bool{}
		for i, r := range refused {
			if selected[refusedNames[i]] {
				kept = append(kept, r)
				refusedSet[refusedNames[i]] = true
			}
		}
		refused = kept
		l.missing = slices.DeleteFunc(l.missing, func(n string) bool { return refusedSet[n] })
	}
	l.refused = append(refused, l.refused...)
	if m.man.IncludeTools == nil {
		l.uncounted = nameless // with include_tools, a nameless definition is not selected
	}
	if err := m.pin(ctx, l.tools); err != nil {
		return listing{}, err
	}
	return l, nil
}

// setRefused keeps the first maxRefusedShown of a listing's refusals and the number
// of the rest, and says whether they differ from the previous listing's. m.mu must
// be held.
func (m *module) setRefused(l listing) (changed bool) {
	all := l.refused
	kept, more := all[:min(len(all), maxRefusedShown)], max(len(all)-maxRefusedShown, 0)+l.uncounted
	changed = !slices.Equal(m.refused, kept) || m.refusedMore != more
	m.refused, m.refusedMore = slices.Clone(kept), more
	return changed
}

// logRefused warns that a listing's refusals changed: one line (the first of them
// and their number), the first time and then at most once a minute, however many
// bad tools a module advertises or how often it changes them. A change within the
// minute is counted in the next line, not logged on its own; the status always
// shows the current refusals.
func (m *module) logRefused(l listing) {
	all := l.refused
	if len(all) == 0 {
		return // cleared: nothing to warn of, and the minute is not spent on it
	}
	n := m.refusals.Note(struct{}{}, m.sup.opts.Now())
	if n == 0 {
		return
	}
	m.log.Warn("module tools refused; its other tools are served", "refused", len(all)+l.uncounted,
		"first", all[0].Upstream, "reason", all[0].Reason, "changes", n)
}

func (m *module) requestRefresh() {
	select {
	case m.refresh <- struct{}{}:
	default: // a refresh is already pending; it will see the latest list
	}
}

// serve watches the running module until it dies or ctx ends. Death is
// acted on at once by a watcher, so calls fail fast even while serve is busy
// re-listing tools.
func (m *module) serve(ctx context.Context) error {
	m.mu.RLock()
	conn, proc := m.sess, m.proc
	m.mu.RUnlock()
	if proc == nil {
		return m.serveConn(ctx)
	}
	sess := conn.(*session)
	// down carries the stdout failure, or nil when the process exited first.
	down := make(chan error, 1)
	go func() {
		var broke error
		select {
		case <-proc.done:
		case <-sess.frames.ended:
			broke = sess.frames.reason
		case <-ctx.Done():
			return
		}
		m.markDown(sess, StateBackoff)
		down <- broke
	}()
	for {
		select {
		case <-ctx.Done():
			m.shutdown(m.sup.shutdownCtx())
			return ctx.Err()
		case broke := <-down:
			m.cleanup(context.Background(), proc)
			// A crash usually closes stdout a moment before the exit is
			// seen; either way both facts belong in the report.
			why := fmt.Errorf("module %s", proc.exit)
			if broke != nil {
				why = fmt.Errorf("module session broke: %w (process %s)", broke, proc.exit)
			}
			return why
		case <-m.restart:
			m.shutdown(context.Background())
			return errRestart
		case <-m.refresh:
			m.relist(ctx, sess)
			// A module that announces changes without pause is re-listed at most
			// once per RelistGap: each re-list costs it a tools/list and may tell
			// every agent session its tools changed. Announcements meanwhile
			// coalesce into the next one.
			select {
			case <-ctx.Done():
			case <-proc.done:
			case <-time.After(m.sup.opts.RelistGap):
			}
		}
	}
}

// markDown takes the session out of service: state changes first, so calls
// answer ErrUnavailable, then requests in flight are failed.
func (m *module) markDown(sess upstream, state State) {
	m.mu.Lock()
	if m.sess != sess {
		m.mu.Unlock()
		return
	}
	m.sess, m.state = nil, state
	m.mu.Unlock()
	sess.close()
	m.sup.changed(m.man.Name)
}

// cleanup stops the process (if it still runs) and records how it ended.
func (m *module) cleanup(ctx context.Context, proc *process) {
	proc.stop(ctx, m.sup.opts.StopGrace)
	proc.release()
	exit := proc.exit
	m.mu.Lock()
	m.proc, m.lastExit = nil, &exit
	m.mu.Unlock()
	m.log.Info("module process ended", "pid", proc.pid, "exit", exit.String())
}

// shutdown stops the module for good (gateway shutdown).
func (m *module) shutdown(ctx context.Context) {
	m.mu.RLock()
	sess, proc := m.sess, m.proc
	m.mu.RUnlock()
	if sess != nil {
		m.markDown(sess, StateStopped)
	}
	if proc != nil {
		m.cleanup(ctx, proc)
	}
	m.setState(StateStopped)
}

// relist refreshes the catalog after the module announced a change. A
// failed listing keeps the previous catalog; a dying module is handled by
// serve's watcher.
func (m *module) relist(ctx context.Context, sess upstream) {
	ctx, cancel := context.WithTimeout(ctx, m.sup.opts.StartTimeout)
	defer cancel()
	l, err := m.catalog(ctx, sess)
	if err != nil {
		m.log.Warn("re-listing tools failed; keeping the previous list", "err", err)
		return
	}
	if len(l.missing) > 0 {
		m.log.Warn("module no longer advertises tools in include_tools", "file", m.man.File, "missing", l.missing)
	}
	m.mu.Lock()
	if m.sess != sess {
		m.mu.Unlock()
		return
	}
	changed := !sameTools(m.tools, l.tools)
	m.tools, m.missing = l.tools, l.missing
	refusedChanged := m.setRefused(l)
	m.mu.Unlock()
	if refusedChanged {
		m.logRefused(l)
	}
	if changed {
		if n := m.changes.Note(struct{}{}, m.sup.opts.Now()); n > 0 {
			m.log.Info("module tools changed", "tools", len(l.tools), "changes", n)
		}
		m.sup.changed(m.man.Name)
	}
}

func sameTools(a, b []toolEntry) bool {
	return slices.EqualFunc(a, b, func(x, y toolEntry) bool {
		return x.Name == y.Name && x.Hash == y.Hash && x.Withheld == y.Withheld
	})
}

func (m *module) status() ModuleStatus {
	m.mu.RLock()
	defer m.mu.RUnlock()
	st := ModuleStatus{
		Name: m.man.Name, Title: m.man.Title, Type: m.man.Type, Description: m.man.Description, Risk: m.man.Risk,
		Tags: slices.Clone(m.man.Tags), State: m.state,
		Restarts: max(m.attempts-1, 0), NextAttempt: m.nextAttempt,
		LastError: m.lastErr, Stderr: m.stderr.snapshot(),
		Tools: []ToolStatus{}, MissingTools: slices.Clone(m.missing),
		RefusedTools: slices.Clone(m.refused), RefusedMore: m.refusedMore,
	}
	if m.proc != nil {
		st.PID = m.proc.pid
	}
	if m.state == StateUp {
		st.UpSince = m.upSince
	}
	if m.lastExit != nil {
		e := *m.lastExit
		st.LastExit = &e
	}
	for _, t := range m.tools {
		ts := ToolStatus{Name: t.Name, Upstream: t.Upstream, Hash: t.Hash, Withheld: t.Withheld, New: t.New}
		if t.Withheld {
			// What a human reviews before approving, in the form the pin keeps,
			// so that the two compare line by line.
			if kept := keptDefinition(t.Def); kept != nil {
				ts.Definition = Reviewable(kept)
			} else {
				ts.Definition = Reviewable(t.Def)
			}
			if t.Pinned != nil {
				ts.PinnedDefinition = Reviewable(t.Pinned)
			}
		}
		st.Tools = append(st.Tools, ts)
	}
	return st
}
