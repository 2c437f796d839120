package modules

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboardhq/switchboard/internal/logevery"
)

// PinStore persists tool-definition pins (OWASP MCP03, "rug pull"): the hash
// of each tool's definition when first seen, or when a human last approved
// it. Tool names are the exposed, prefixed names. The store package
// implements it on SQLite; MemoryPins serves tests.
type PinStore interface {
	// ToolPins returns the pinned hash of every pinned tool of module.
	ToolPins(ctx context.Context, module string) (map[string]string, error)
	// PinTool records hash as the approved definition of tool, and def as that
	// definition (to show what a later one changed), replacing any earlier pin,
	// and clears a pending hash for it.
	PinTool(ctx context.Context, module, tool, hash string, def []byte) error
	// WithholdTool records hash, and def as its definition, as the changed
	// definition that is withheld pending approval, so an operator can approve
	// it from another process (CLI) by pinning that hash.
	WithholdTool(ctx context.Context, module, tool, hash string, def []byte) error
	// WithholdNewTool records hash, and def as its definition, for a tool the
	// module did not list when its tools were first pinned: pinned with no
	// approved hash (""), this one pending until a human approves it.
	WithholdNewTool(ctx context.Context, module, tool, hash string, def []byte) error
	// PinnedDefinition returns the definition kept with tool's pin, or nil
	// when none was kept.
	PinnedDefinition(ctx context.Context, module, tool string) ([]byte, error)
	// PinnedDefinitions returns the definition kept with each approved pin of
	// module (tool → definition), those that have one.
	PinnedDefinitions(ctx context.Context, module string) (map[string][]byte, error)
	// MetAsPinned records that module listed each tool in hashes (tool →
	// hash) with its pinned definition, defs holding those definitions: a pin
	// kept without one gets it, and a pending definition is dropped (the module
	// went back to the approved one).
	MetAsPinned(ctx context.Context, module string, hashes map[string]string, defs map[string][]byte) error
}

// MemoryPins is a PinStore kept in memory, for tests and for running without
// persistence (every restart of the gateway then re-pins on first sight).
type MemoryPins struct {
	mu      sync.Mutex
	pins    map[string]map[string]string
	defs    map[string]map[string][]byte
	pending map[string]map[string]string
}

// NewMemoryPins returns an empty in-memory pin store.
func NewMemoryPins() *MemoryPins {
	return &MemoryPins{pins: map[string]map[string]string{}, defs: map[string]map[string][]byte{},
		pending: map[string]map[string]string{}}
}

// module makes module's maps. p.mu must be held.
func (p *MemoryPins) module(module string) {
	if p.pins[module] == nil {
		p.pins[module], p.defs[module], p.pending[module] = map[string]string{}, map[string][]byte{}, map[string]string{}
	}
}

// ToolPins implements PinStore.
func (p *MemoryPins) ToolPins(_ context.Context, module string) (map[string]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]string{}
	for tool, hash := range p.pins[module] {
		out[tool] = hash
	}
	return out, nil
}

// PinTool implements PinStore.
func (p *MemoryPins) PinTool(_ context.Context, module, tool, hash string, def []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.module(module)
	p.pins[module][tool] = hash
	p.defs[module][tool] = def
	if p.pending[module][tool] == hash {
		delete(p.pending[module], tool)
	}
	return nil
}

// WithholdTool implements PinStore.
func (p *MemoryPins) WithholdTool(_ context.Context, module, tool, hash string, _ []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.module(module)
	p.pending[module][tool] = hash
	return nil
}

// WithholdNewTool implements PinStore.
func (p *MemoryPins) WithholdNewTool(_ context.Context, module, tool, hash string, _ []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.module(module)
	if h, ok := p.pins[module][tool]; ok && h != "" {
		return nil
	}
	p.pins[module][tool] = ""
	p.pending[module][tool] = hash
	return nil
}

// PinnedDefinition implements PinStore.
func (p *MemoryPins) PinnedDefinition(_ context.Context, module, tool string) ([]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.defs[module][tool], nil
}

// PinnedDefinitions implements PinStore.
func (p *MemoryPins) PinnedDefinitions(_ context.Context, module string) (map[string][]byte, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]byte{}
	for tool, def := range p.defs[module] {
		if def != nil && p.pins[module][tool] != "" {
			out[tool] = def
		}
	}
	return out, nil
}

// MetAsPinned implements PinStore.
func (p *MemoryPins) MetAsPinned(_ context.Context, module string, hashes map[string]string, defs map[string][]byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	for tool, hash := range hashes {
		if p.pins[module][tool] != hash {
			continue
		}
		if p.defs[module][tool] == nil {
			p.defs[module][tool] = defs[tool]
		}
		delete(p.pending[module], tool)
	}
	return nil
}

// Pending returns the withheld hash recorded for tool, if any.
func (p *MemoryPins) Pending(module, tool string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.pending[module][tool]
	return h, ok
}

// seed lists, until the module's first listing, the tools whose approved
// definitions its pins keep: a module that does not come up after serve starts
// then has its tools answer unavailable (retry later), as when it goes down
// later, rather than be unknown to agents.
func (m *module) seed(ctx context.Context) error {
	pins := m.sup.opts.Pins
	hashes, err := pins.ToolPins(ctx, m.man.Name)
	if err != nil {
		return err
	}
	defs, err := pins.PinnedDefinitions(ctx, m.man.Name)
	if err != nil {
		return err
	}
	included := map[string]bool{}
	for _, name := range m.man.IncludeTools {
		included[exposedName(m.man.Name, name)] = true
	}
	var tools []toolEntry
	for name, def := range defs {
		if m.man.IncludeTools != nil && !included[name] {
			continue
		}
		schemas, err := checkSchemas(def)
		if err != nil {
			continue
		}
		// The module's own name for it is not kept: it is known again from the
		// module's first listing (no call reaches a module that is not up).
		tools = append(tools, toolEntry{Name: name, Def: def, Hash: hashes[name], Output: schemas.Output != nil})
	}
	slices.SortFunc(tools, func(a, b toolEntry) int { return strings.Compare(a.Name, b.Name) })
	m.mu.Lock()
	if m.tools == nil {
		m.tools = tools
	}
	m.mu.Unlock()
	return nil
}

// pin compares each tool with its pin: first sight pins it, a changed
// definition withholds it (OWASP MCP03) until a human approves.
func (m *module) pin(ctx context.Context, tools []toolEntry) error {
	o := &m.sup.opts
	name := m.man.Name
	pins, err := o.Pins.ToolPins(ctx, name)
	if err != nil {
		return fmt.Errorf("modules: %s: read tool pins: %w", name, err)
	}
	// Tools listed as pinned: their pins may lack a definition, or hold a
	// pending one the module has since gone back from.
	met, metDefs := map[string]string{}, map[string][]byte{}
	// A tool the module did not list when its tools were first pinned is new:
	// withheld until a human approves it, as a changed one is (a module that
	// adds delete_everything is as much a rug pull). With include_tools the
	// manifest, the operator's, names every tool that can appear.
	firstListing := len(pins) == 0 || m.man.IncludeTools != nil
	for i := range tools {
		t := &tools[i]
		pinned, ok := pins[t.Name]
		switch {
		case !ok && !firstListing:
			fallthrough
		case ok && pinned == "":
			t.Withheld, t.New = true, true
			if _, ok := m.withheldAlready(t.Name, t.Hash); ok {
				continue
			}
			if err := o.Pins.WithholdNewTool(ctx, name, t.Name, t.Hash, keptDefinition(t.Def)); err != nil {
				return fmt.Errorf("modules: %s: withhold new tool %s: %w", name, t.Name, err)
			}
			if !m.reports.withheld(t.Name, t.Hash, o.Now()) {
				continue
			}
			detail := fmt.Sprintf("new tool, not listed when the module's tools were first pinned: sha256 %s; approve with: switchboard modules approve %s %s --hash %s",
				t.Hash, name, t.Name, t.Hash)
			m.sup.audit("module.tool_withheld", name+"/"+t.Name, detail)
			m.log.Warn("new tool; withheld until approved", "tool", t.Name, "sha256", t.Hash)
		case !ok:
			if err := o.Pins.PinTool(ctx, name, t.Name, t.Hash, keptDefinition(t.Def)); err != nil {
				return fmt.Errorf("modules: %s: pin %s: %w", name, t.Name, err)
			}
			m.sup.audit("module.tool_pinned", name+"/"+t.Name, "sha256 "+t.Hash)
		case pinned == t.Hash:
			met[t.Name], metDefs[t.Name] = t.Hash, keptDefinition(t.Def)
			// Withheld until now: should the module change it again, that is
			// news to report, even to a definition reported before.
			m.reports.forgetSeen(t.Name)
		case pinned != t.Hash:
			t.Withheld = true
			if prev, ok := m.withheldAlready(t.Name, t.Hash); ok {
				t.Pinned = prev
				continue
			}
			if err := o.Pins.WithholdTool(ctx, name, t.Name, t.Hash, keptDefinition(t.Def)); err != nil {
				return fmt.Errorf("modules: %s: withhold %s: %w", name, t.Name, err)
			}
			if t.Pinned, err = o.Pins.PinnedDefinition(ctx, name, t.Name); err != nil {
				return fmt.Errorf("modules: %s: read the pinned definition of %s: %w", name, t.Name, err)
			}
			if !m.reports.withheld(t.Name, t.Hash, o.Now()) {
				continue
			}
			detail := fmt.Sprintf("definition changed: pinned sha256 %s, now %s; approve with: switchboard modules approve %s %s --hash %s",
				pinned, t.Hash, name, t.Name, t.Hash)
			m.sup.audit("module.tool_withheld", name+"/"+t.Name, detail)
			m.log.Warn("tool definition changed; withheld until approved", "tool", t.Name, "pinned", pinned, "now", t.Hash)
		}
	}
	// Best effort: the tools are served as pinned either way, and a failed
	// write (a full disk) must not keep the module down.
	if err := o.Pins.MetAsPinned(ctx, name, met, metDefs); err != nil {
		m.log.Warn("could not record the tools listed as pinned (a pending definition the module went back from stays pending)", "err", err)
	}
	return nil
}

// withheldReports keeps a module whose definitions flap (a description with a
// timestamp in it, or one that alternates) from writing an audit row and a
// warning on every tools/list_changed: a definition already reported is not
// reported again, and a tool's new definitions at most once a minute. The tool is
// withheld, and its pending definition stored, every time regardless.
type withheldReports struct {
	times logevery.Counter[string] // per tool

	mu   sync.Mutex
	seen map[string]map[string]bool // tool → hashes reported
}

const withheldReportEvery = time.Minute

// maxReportedHashes bounds the memory of hashes per tool.
const maxReportedHashes = 64

// withheld says whether tool's withheld definition hash should be reported now.
func (r *withheldReports) withheld(tool, hash string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen[tool][hash] {
		return false
	}
	if r.times.Note(tool, now) == 0 {
		return false
	}
	if r.seen == nil {
		r.seen = map[string]map[string]bool{}
	}
	if r.seen[tool] == nil || len(r.seen[tool]) >= maxReportedHashes {
		r.seen[tool] = map[string]bool{}
	}
	r.seen[tool][hash] = true
	return true
}

// forgetSeen forgets which of tool's definitions were reported, keeping the
// once-a-minute bound.
func (r *withheldReports) forgetSeen(tool string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, tool)
}

// reset forgets what was reported about tool.
func (r *withheldReports) reset(tool string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, tool)
	r.times.Reset(tool)
}

func (m *module) withheldAlready(tool, hash string) (pinned json.RawMessage, ok bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, t := range m.tools {
		if t.Name == tool && t.Hash == hash && t.Withheld {
			return t.Pinned, true
		}
	}
	return nil, false
}

// release un-withholds tools whose current hash is now pinned; it reports
// whether anything changed.
func (m *module) release(pins map[string]string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := false
	for i := range m.tools {
		t := &m.tools[i]
		if t.Withheld && pins[t.Name] == t.Hash {
			t.Withheld, t.New = false, false
			changed = true
			m.reports.reset(t.Name) // the next change after an approval is news again
		}
	}
	return changed
}
