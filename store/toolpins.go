package store

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"
)

// Tool pins are the durable half of the module supervisor's defence against a module
// that silently redefines a tool (OWASP MCP03, "rug pull"). The supervisor pins each
// tool's definition hash on first sight and records a changed one as pending; only a
// human approving the pending hash lets the tool through again. The methods ToolPins,
// PinTool and WithholdTool are the modules.PinStore the supervisor is given (this
// package does not import modules; the method set matches it).

// ToolPin is one module tool's pinned definition and, if it changed, the pending one.
type ToolPin struct {
	Module      string     `json:"module"`
	Tool        string     `json:"tool"` // exposed, prefixed name
	Hash        string     `json:"hash"`
	PendingHash string     `json:"pending_hash,omitempty"`
	PinnedAt    time.Time  `json:"pinned_at"`
	PendingAt   *time.Time `json:"pending_at,omitempty"`
	// Definition and PendingDefinition are the definitions of Hash and
	// PendingHash as the gateway kept them; nil where none was kept.
	Definition        []byte `json:"-"`
	PendingDefinition []byte `json:"-"`
}

// ToolPins returns the pinned hash of every pinned tool of module.
func (s *Store) ToolPins(ctx context.Context, module string) (map[string]string, error) {
	rows, err := s.query(ctx, `SELECT tool, hash FROM tool_pins WHERE module = ?`, module)
	if err != nil {
		return nil, fmt.Errorf("store: tool pins of %s: %w", module, err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var tool, hash string
		if err := rows.Scan(&tool, &hash); err != nil {
			return nil, fmt.Errorf("store: tool pins of %s: %w", module, err)
		}
		out[tool] = hash
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: tool pins of %s: %w", module, err)
	}
	return out, nil
}

// PinTool records hash as the approved definition of tool, and def as that
// definition for a later comparison (nil when it is not to be kept), replacing any
// earlier pin, and clears the pending hash if it is this one: a definition recorded
// as pending since (the module redefined the tool again while a human approved)
// stays pending. The supervisor audits the pin itself.
func (s *Store) PinTool(ctx context.Context, module, tool, hash string, def []byte) error {
	return s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT INTO tool_pins (module, tool, hash, definition, pinned_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (module, tool) DO UPDATE SET hash = excluded.hash, definition = excluded.definition,
				pinned_at = excluded.pinned_at,
				pending_definition = CASE WHEN tool_pins.pending_hash = excluded.hash THEN NULL ELSE tool_pins.pending_definition END,
				pending_at = CASE WHEN tool_pins.pending_hash = excluded.hash THEN NULL ELSE tool_pins.pending_at END,
				pending_hash = CASE WHEN tool_pins.pending_hash = excluded.hash THEN NULL ELSE tool_pins.pending_hash END`,
			module, tool, hash, nullText(def), ms(w.now))
		if err != nil {
			return fmt.Errorf("store: pin %s/%s: %w", module, tool, err)
		}
		return nil
	})
}

// WithholdTool records hash, and def as its definition (nil when it is not to be
// kept), as the changed definition of an already pinned tool, which stays withheld
// until a human approves it (ApprovePendingTool).
func (s *Store) WithholdTool(ctx context.Context, module, tool, hash string, def []byte) error {
	return s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`UPDATE tool_pins SET pending_hash = ?, pending_definition = ?, pending_at = ? WHERE module = ? AND tool = ?`,
			hash, nullText(def), ms(w.now), module, tool)
		if err != nil {
			return fmt.Errorf("store: withhold %s/%s: %w", module, tool, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: withhold %s/%s: it was never pinned: %w", module, tool, ErrNotFound)
		}
		return nil
	})
}

// WithholdNewTool records hash, and def as its definition, for a tool the module
// did not list when its tools were first pinned: a pin with no approved hash ("")
// and this one pending, withheld until a human approves it (ApprovePendingTool,
// or the gateway's PinTool). A tool already pinned is left to WithholdTool.
func (s *Store) WithholdNewTool(ctx context.Context, module, tool, hash string, def []byte) error {
	return s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT INTO tool_pins (module, tool, hash, pinned_at, pending_hash, pending_definition, pending_at)
			VALUES (?, ?, '', ?, ?, ?, ?)
			ON CONFLICT (module, tool) DO UPDATE SET pending_hash = excluded.pending_hash,
				pending_definition = excluded.pending_definition, pending_at = excluded.pending_at
			WHERE tool_pins.hash = ''`,
			module, tool, ms(w.now), hash, nullText(def), ms(w.now))
		if err != nil {
			return fmt.Errorf("store: withhold new tool %s/%s: %w", module, tool, err)
		}
		return nil
	})
}

// PinnedDefinition returns the definition PinTool kept with tool's pin: nil when
// the tool is not pinned, or was pinned without one (by a Switchboard that kept
// only hashes).
func (s *Store) PinnedDefinition(ctx context.Context, module, tool string) ([]byte, error) {
	var def sql.NullString
	err := s.queryRow(ctx, `SELECT definition FROM tool_pins WHERE module = ? AND tool = ?`, module, tool).Scan(&def)
	if err != nil && !notFound(err) {
		return nil, fmt.Errorf("store: pinned definition of %s/%s: %w", module, tool, err)
	}
	if !def.Valid {
		return nil, nil
	}
	return []byte(def.String), nil
}

// MetAsPinned records that module listed each tool in hashes with the
// definition pinned for it (defs holds those definitions, as PinTool keeps them):
// a pin with no definition (made by a Switchboard that kept only hashes) gets its
// own, and a pending definition is dropped, since the module went back to the
// approved one and nothing is withheld any more: left, it could be approved later
// by mistake (an approval without --hash takes whatever is pending). One write
// for the listing; tools whose pin has moved on are left as they are.
func (s *Store) MetAsPinned(ctx context.Context, module string, hashes map[string]string, defs map[string][]byte) error {
	if len(hashes) == 0 {
		return nil
	}
	// Mostly there is nothing to record: read first, and write only then.
	rows, err := s.query(ctx, `SELECT tool, hash FROM tool_pins
		WHERE module = ? AND (definition IS NULL OR pending_hash IS NOT NULL)`, module)
	if err != nil {
		return fmt.Errorf("store: %s tools met as pinned: %w", module, err)
	}
	due := map[string]string{}
	for rows.Next() {
		var tool, hash string
		if err := rows.Scan(&tool, &hash); err != nil {
			rows.Close()
			return fmt.Errorf("store: %s tools met as pinned: %w", module, err)
		}
		if hash != "" && hashes[tool] == hash {
			due[tool] = hash
		}
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("store: %s tools met as pinned: %w", module, err)
	}
	if len(due) == 0 {
		return nil
	}
	return s.write(ctx, func(w *wtx) error {
		for tool, hash := range due {
			if _, err := w.exec(`UPDATE tool_pins SET definition = coalesce(definition, ?),
					pending_hash = NULL, pending_definition = NULL, pending_at = NULL
				WHERE module = ? AND tool = ? AND hash = ? AND (definition IS NULL OR pending_hash IS NOT NULL)`,
				nullText(defs[tool]), module, tool, hash); err != nil {
				return fmt.Errorf("store: %s/%s met as pinned: %w", module, tool, err)
			}
		}
		return nil
	})
}

// PinnedDefinitions returns the definition kept with each approved pin of module
// (tool → definition), those that have one: what the gateway lists of a module
// that has not come up since serve started.
func (s *Store) PinnedDefinitions(ctx context.Context, module string) (map[string][]byte, error) {
	rows, err := s.query(ctx, `SELECT tool, definition FROM tool_pins
		WHERE module = ? AND hash != '' AND definition IS NOT NULL`, module)
	if err != nil {
		return nil, fmt.Errorf("store: pinned definitions of %s: %w", module, err)
	}
	defer rows.Close()
	out := map[string][]byte{}
	for rows.Next() {
		var tool, def string
		if err := rows.Scan(&tool, &def); err != nil {
			return nil, fmt.Errorf("store: pinned definitions of %s: %w", module, err)
		}
		out[tool] = []byte(def)
	}
	return out, rows.Err()
}

// nullText is def as a TEXT column's value: NULL when there is none.
func nullText(def []byte) any {
	if def == nil {
		return nil
	}
	return string(def)
}

// ListToolPins lists the pins of module, or of every module for "", by module and
// tool.
func (s *Store) ListToolPins(ctx context.Context, module string) ([]ToolPin, error) {
	rows, err := s.query(ctx, `SELECT module, tool, hash, coalesce(pending_hash, ''), pinned_at, pending_at,
			definition, pending_definition
		FROM tool_pins WHERE ? = '' OR module = ? ORDER BY module, tool`, module, module)
	if err != nil {
		return nil, fmt.Errorf("store: list tool pins: %w", err)
	}
	defer rows.Close()
	var out []ToolPin
	for rows.Next() {
		var p ToolPin
		var pinned int64
		var pending sql.NullInt64
		var def, pendingDef sql.NullString
		if err := rows.Scan(&p.Module, &p.Tool, &p.Hash, &p.PendingHash, &pinned, &pending, &def, &pendingDef); err != nil {
			return nil, fmt.Errorf("store: list tool pins: %w", err)
		}
		p.PinnedAt, p.PendingAt = fromMS(pinned), fromNullMS(pending)
		if def.Valid {
			p.Definition = []byte(def.String)
		}
		if pendingDef.Valid {
			p.PendingDefinition = []byte(pendingDef.String)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// MinApprovalHashDigits is the shortest start of a definition's SHA-256 that an
// approval may name it by.
const MinApprovalHashDigits = 16

// ApprovePendingTool pins the pending definition of tool, so the gateway releases it
// (a running serve notices the commit and reloads its pins), and audits who decided.
// It is ErrNotFound when the tool was never pinned, and ErrConflict when nothing is
// pending (its definition has not changed since it was pinned). hash, when not
// empty, is the definition the human reviewed: its SHA-256, or at least its first
// 16 hex digits (fewer would let a module search for a second definition that
// starts the same); if the pending one is another, nothing is pinned and the error
// is ErrStale.
func (s *Store) ApprovePendingTool(ctx context.Context, module, tool, hash, actor string) (ToolPin, error) {
	hash = strings.ToLower(hash)
	if hash != "" && (len(hash) < MinApprovalHashDigits || len(hash) > 64 || strings.Trim(hash, "0123456789abcdef") != "") {
		return ToolPin{}, fmt.Errorf("store: approve %s/%s: the hash must be %d to 64 hex digits of the SHA-256: %w",
			module, tool, MinApprovalHashDigits, ErrInvalid)
	}
	var pin ToolPin
	err := s.write(ctx, func(w *wtx) error {
		var old, pending string
		err := w.queryRow(`SELECT hash, coalesce(pending_hash, '') FROM tool_pins WHERE module = ? AND tool = ?`,
			module, tool).Scan(&old, &pending)
		if notFound(err) {
			return fmt.Errorf("store: approve %s/%s: no such pinned tool: %w", module, tool, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: approve %s/%s: %w", module, tool, err)
		}
		if pending == "" {
			return fmt.Errorf("store: approve %s/%s: nothing is pending, its definition has not changed since it was pinned: %w",
				module, tool, ErrConflict)
		}
		if !strings.HasPrefix(pending, hash) {
			return fmt.Errorf("store: approve %s/%s: %s is not the pending definition (sha256 %.16s…): %w",
				module, tool, hash, pending, ErrStale)
		}
		// Only the definition just checked is pinned: on PostgreSQL the module
		// (serve's supervisor, another process) may record a newer one between
		// the read above and this write, which the human never reviewed.
		res, err := w.exec(`UPDATE tool_pins SET hash = pending_hash, definition = pending_definition, pinned_at = ?,
				pending_hash = NULL, pending_definition = NULL, pending_at = NULL
			WHERE module = ? AND tool = ? AND pending_hash = ?`, ms(w.now), module, tool, pending)
		if err != nil {
			return fmt.Errorf("store: approve %s/%s: %w", module, tool, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: approve %s/%s: its pending definition changed while it was approved: %w",
				module, tool, ErrStale)
		}
		pin = ToolPin{Module: module, Tool: tool, Hash: pending, PinnedAt: fromMS(ms(w.now))}
		was := "was " + old
		if old == "" {
			was = "a new tool"
		}
		return w.audit(actor, "module.tool_approved", module+"/"+tool, "", fmt.Sprintf("sha256 %s (%s)", pending, was))
	})
	if err != nil {
		return ToolPin{}, err
	}
	return pin, nil
}
