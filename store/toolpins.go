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

// PinTool records hash as the approved definition of tool, replacing any earlier pin,
// and clears the pending hash if it is this one: a definition recorded as pending
// since (the module redefined the tool again while a human approved) stays pending.
// The supervisor audits the pin itself.
func (s *Store) PinTool(ctx context.Context, module, tool, hash string) error {
	return s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT INTO tool_pins (module, tool, hash, pinned_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (module, tool) DO UPDATE SET hash = excluded.hash, pinned_at = excluded.pinned_at,
				pending_hash = CASE WHEN pending_hash = excluded.hash THEN NULL ELSE pending_hash END,
				pending_at = CASE WHEN pending_hash = excluded.hash THEN NULL ELSE pending_at END`,
			module, tool, hash, ms(w.now))
		if err != nil {
			return fmt.Errorf("store: pin %s/%s: %w", module, tool, err)
		}
		return nil
	})
}

// WithholdTool records hash as the changed definition of an already pinned tool,
// which stays withheld until a human approves it (ApprovePendingTool).
func (s *Store) WithholdTool(ctx context.Context, module, tool, hash string) error {
	return s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`UPDATE tool_pins SET pending_hash = ?, pending_at = ? WHERE module = ? AND tool = ?`,
			hash, ms(w.now), module, tool)
		if err != nil {
			return fmt.Errorf("store: withhold %s/%s: %w", module, tool, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: withhold %s/%s: it was never pinned: %w", module, tool, ErrNotFound)
		}
		return nil
	})
}

// ListToolPins lists the pins of module, or of every module for "", by module and
// tool.
func (s *Store) ListToolPins(ctx context.Context, module string) ([]ToolPin, error) {
	rows, err := s.query(ctx, `SELECT module, tool, hash, coalesce(pending_hash, ''), pinned_at, pending_at
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
		if err := rows.Scan(&p.Module, &p.Tool, &p.Hash, &p.PendingHash, &pinned, &pending); err != nil {
			return nil, fmt.Errorf("store: list tool pins: %w", err)
		}
		p.PinnedAt, p.PendingAt = fromMS(pinned), fromNullMS(pending)
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
		if _, err := w.exec(`UPDATE tool_pins SET hash = pending_hash, pinned_at = ?, pending_hash = NULL, pending_at = NULL
			WHERE module = ? AND tool = ?`, ms(w.now), module, tool); err != nil {
			return fmt.Errorf("store: approve %s/%s: %w", module, tool, err)
		}
		pin = ToolPin{Module: module, Tool: tool, Hash: pending, PinnedAt: fromMS(ms(w.now))}
		return w.audit(actor, "module.tool_approved", module+"/"+tool, "",
			fmt.Sprintf("sha256 %s (was %s)", pending, old))
	})
	if err != nil {
		return ToolPin{}, err
	}
	return pin, nil
}
