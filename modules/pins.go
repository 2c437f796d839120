package modules

import (
	"context"
	"sync"
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
