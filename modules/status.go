package modules

import (
	"encoding/json"
	"time"

	"github.com/switchboardhq/switchboard/internal/linediff"
	"github.com/switchboardhq/switchboard/internal/pretty"
)

// ModuleStatus is a module's state for /readyz, the CLI and the UI.
type ModuleStatus struct {
	Name        string       `json:"name"`
	Title       string       `json:"title"`
	Type        string       `json:"type,omitempty"`        // module, remote or rest
	Description string       `json:"description,omitempty"` // the manifest's
	Risk        string       `json:"risk,omitempty"`        // the manifest's: read, write, …
	Tags        []string     `json:"tags,omitempty"`        // the manifest's
	State       State        `json:"state"`
	PID         int          `json:"pid,omitempty"`
	Restarts    int          `json:"restarts"`
	UpSince     time.Time    `json:"up_since,omitzero"`
	NextAttempt time.Time    `json:"next_attempt,omitzero"`
	LastExit    *Exit        `json:"last_exit,omitempty"`
	LastError   string       `json:"last_error,omitempty"`
	Stderr      []string     `json:"stderr,omitempty"` // last lines, oldest first
	Tools       []ToolStatus `json:"tools"`
	// MissingTools are include_tools entries the module no longer
	// advertises (only possible after start-up, which refuses them).
	MissingTools []string `json:"missing_tools,omitempty"`
	// RefusedTools are tools the module advertises that the gateway cannot
	// expose (see RefusedTool); its other tools are served.
	RefusedTools []RefusedTool `json:"refused_tools,omitempty"`
	RefusedMore  int           `json:"refused_more,omitempty"` // refusals past the first maxRefusedShown
}

// ToolStatus is one tool's pin state.
type ToolStatus struct {
	Name     string `json:"name"`
	Upstream string `json:"upstream"`
	Hash     string `json:"hash"`
	Withheld bool   `json:"withheld"`
	// New is true for a tool withheld as new: the module did not list it when
	// its tools were first pinned, and no definition of it was ever approved.
	New bool `json:"new,omitempty"`
	// Definition is a withheld tool's new definition, as the gateway would list
	// it (exposed name), keys sorted and indented: what a human reviews before
	// approving Hash.
	Definition json.RawMessage `json:"definition,omitempty"`
	// PinnedDefinition is a withheld tool's definition as it was last approved,
	// in the same form, to compare with Definition; absent when the pin predates
	// kept definitions.
	PinnedDefinition json.RawMessage `json:"pinned_definition,omitempty"`
}

// changeContext is how many unchanged lines Changes shows either side of a change.
const changeContext = 3

// Changes compares a withheld tool's approved definition with its new one line
// by line, both laid out alike (JSON that has been through /readyz arrives
// compact): the changed lines and changeContext unchanged ones either side. It is
// nil when no approved definition was kept, or when no line differs.
func (t ToolStatus) Changes() []linediff.Line {
	if len(t.PinnedDefinition) == 0 || len(t.Definition) == 0 {
		return nil
	}
	lines := linediff.Lines(LaidOut(t.PinnedDefinition), LaidOut(t.Definition))
	if !linediff.Changed(lines) {
		return nil
	}
	return linediff.Context(lines, changeContext)
}

// LaidOut is a definition indented two spaces a level, or as it is when it is not
// JSON or would cost too much to indent: a module's definitions are not ours, and
// the board and the CLI show them.
func LaidOut(def json.RawMessage) string {
	return pretty.Format(string(def)).Body
}

// Status reports every module, in manifest order.
func (s *Supervisor) Status() []ModuleStatus {
	out := make([]ModuleStatus, 0, len(s.mods))
	for _, m := range s.mods {
		out = append(out, m.status())
	}
	return out
}

// Ready reports whether every module is up. With no modules it is true.
func (s *Supervisor) Ready() bool {
	for _, m := range s.mods {
		m.mu.RLock()
		up := m.state == StateUp
		m.mu.RUnlock()
		if !up {
			return false
		}
	}
	return true
}
