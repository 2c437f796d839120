package store

import (
	"strconv"
	"strings"
)

// TodoSearch narrows a todo listing by what an operator remembers of a todo.
// Every field set must match; the zero value matches every todo.
type TodoSearch struct {
	// Key is the provider's delivery id of the event the todo was made from (or
	// replays): the idempotency key a provider's dashboard shows; a todo whose
	// own key (TodoOptions.Key) this is matches too.
	Key string
	// TodoKey is a todo's own key (TodoOptions.Key), exactly: the todos of one
	// subject, such as octo/repo#42, and no delivery's.
	TodoKey string
	// Source is who made the todo, as its created_by says: webhook:N (or N alone)
	// for the todos webhook N's deliveries made, human:… or agent:… for the ones
	// they added or replayed, system; or else its source type (github, stripe, …,
	// manual, replay).
	Source string
	// Type is the provider's event type (push, invoice.paid, …), exactly.
	Type string
	// Error is text the todo's last error contains, in any case for ASCII letters.
	Error string
	// Holder is the agent (agent:<id>, or the id alone) that holds the todo
	// claimed now.
	Holder string
}

// IsZero reports whether s matches every todo.
func (s TodoSearch) IsZero() bool { return s == TodoSearch{} }

// creator is the created_by value s.Source names, or "" when it names a source type.
func (s TodoSearch) creator() string {
	if n, err := strconv.ParseInt(s.Source, 10, 64); err == nil && n > 0 {
		return webhookTarget(n)
	}
	if s.Source == "system" || strings.Contains(s.Source, ":") {
		return s.Source
	}
	return ""
}

// exact reports whether the search has a term an index finds, and names the
// index that walks its todos newest first: "" for a key, whose few todos are
// found by rowid. Who made a todo, its source type and its event type have no
// index of their own: each would cost every delivery one more index entry (a
// tenth of ingest's rate in `switchboard bench`), so those terms, like an
// error's text, filter the todos the queue and state leave, newest first, until
// a page is full.
func (s TodoSearch) exact() (index string, ok bool) {
	switch {
	case s.Key != "":
		return "", true // NOT INDEXED: its few rowids, not a walk of an index
	case s.TodoKey != "":
		return "todos_key", true // the key's todos, newest first
	case s.Holder != "":
		return "todos_state_id", true // only claimed todos have a holder: a short walk
	}
	return "", false
}

// where appends the search's conditions and their arguments to a listing's, for
// PostgreSQL when pg.
func (s TodoSearch) where(where []string, args []any, pg bool) ([]string, []any) {
	if s.Key != "" {
		// CROSS JOIN keeps webhooks outside: one probe of each webhook's
		// (webhook_id, delivery_id) key, as the delivery id alone has no index
		// and webhooks are few.
		events := `SELECT e.id FROM webhooks h CROSS JOIN webhook_events e ON e.webhook_id = h.id AND e.delivery_id = ?`
		key := `id IN (SELECT e.todo_id FROM webhooks h
			CROSS JOIN webhook_events e ON e.webhook_id = h.id AND e.delivery_id = ?
			UNION ALL SELECT r.id FROM todos r INDEXED BY todos_replays
			WHERE r.source_type = 'replay' AND r.source_event_id IN (` + events + `)
			UNION ALL SELECT k.id FROM todos k INDEXED BY todos_key WHERE k.key = ?)`
		if pg {
			// PostgreSQL's CROSS JOIN takes no ON, and its planner needs no push.
			events = `SELECT e.id FROM webhooks h JOIN webhook_events e ON e.webhook_id = h.id AND e.delivery_id = ?`
			key = `id IN (SELECT e.todo_id FROM webhooks h
			JOIN webhook_events e ON e.webhook_id = h.id AND e.delivery_id = ?
			UNION ALL SELECT r.id FROM todos r
			WHERE r.source_type = 'replay' AND r.source_event_id IN (` + events + `)
			UNION ALL SELECT k.id FROM todos k WHERE k.key = ?)`
		}
		where = append(where, key)
		args = append(args, s.Key, s.Key, s.Key)
	}
	if s.TodoKey != "" {
		where = append(where, "key = ?")
		args = append(args, s.TodoKey)
	}
	if s.Holder != "" {
		holder := s.Holder
		if !strings.Contains(holder, ":") {
			holder = "agent:" + holder // as the board names an endpoint's agent
		}
		where = append(where, "state = 'claimed'", "owner = ?")
		args = append(args, holder)
	}
	if c := s.creator(); c != "" {
		where = append(where, "created_by = ?")
		args = append(args, c)
	} else if s.Source != "" {
		where = append(where, "source_type = ?")
		args = append(args, s.Source)
	}
	if s.Type != "" {
		where = append(where, "source_event_type = ?")
		args = append(args, s.Type)
	}
	if s.Error != "" {
		like, pattern := `last_error LIKE ? ESCAPE '\'`, "%"+escapeLike(s.Error)+"%"
		if pg {
			// SQLite's LIKE ignores the case of ASCII letters, and only theirs
			// (ILIKE would fold É and İ too).
			like = `translate(last_error, '` + asciiUpper + `', '` + asciiLower + `') LIKE ? ESCAPE '\'`
			pattern = lowerASCII(pattern)
		}
		where = append(where, like)
		args = append(args, pattern)
	}
	return where, args
}

const (
	asciiUpper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	asciiLower = "abcdefghijklmnopqrstuvwxyz"
)

// lowerASCII is s with its ASCII letters in lower case, and nothing else changed.
func lowerASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + ('a' - 'A')
		}
		return r
	}, s)
}

// escapeLike makes s match itself in a LIKE pattern with ESCAPE '\'.
func escapeLike(s string) string {
	return strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`).Replace(s)
}
