package store

import (
	"database/sql"
	"encoding/base64"
	"strings"
	"unicode/utf8"
)

// A payload is bytes: a todo's own (todo_payloads.payload) or its webhook
// event's body (webhook_events.body). SQLite's TEXT keeps any bytes. On
// PostgreSQL the body is BYTEA and read as bytes, but todo_payloads.payload is
// TEXT, which holds only UTF-8 without NUL: a payload that is not (a binary
// body added as a todo) is kept there as pgBinaryMark and its base64, and so is
// one that starts as the mark does, so that every payload reads back as it was
// written. Only this file knows the encoding.

// pgBinaryMark starts an encoded payload: U+FDD0, a noncharacter no text
// payload has reason to start with, and a word for whoever reads the table.
const pgBinaryMark = "\uFDD0base64:"

// pgPayloadIn is payload as todo_payloads.payload keeps it on PostgreSQL.
func pgPayloadIn(payload string) string {
	if utf8.ValidString(payload) && !strings.ContainsRune(payload, 0) && !strings.HasPrefix(payload, pgBinaryMark[:3]) {
		return payload
	}
	return pgBinaryMark + base64.StdEncoding.EncodeToString([]byte(payload))
}

// pgPayloadOut is the payload that todo_payloads.payload keeps as stored.
func pgPayloadOut(stored string) string {
	if b64, ok := strings.CutPrefix(stored, pgBinaryMark); ok {
		if b, err := base64.StdEncoding.DecodeString(b64); err == nil {
			return string(b)
		}
	}
	return stored
}

// pgTodoColumnsFull is todoColumnsFull on PostgreSQL: the todo's own payload and
// its event's body as two columns, the body as bytes (PostgreSQL will not read
// bytes that are not UTF-8 as text).
const pgTodoColumnsFull = todoColumns + `,
	(SELECT payload FROM todo_payloads WHERE todo_id = todos.id),
	(SELECT body FROM webhook_events WHERE id = todos.source_event_id)`

// fullColumns selects a todo with its payload, in this store's dialect.
func (s *Store) fullColumns() string {
	if s.pg {
		return pgTodoColumnsFull
	}
	return todoColumnsFull
}

// scanFull reads a row of fullColumns.
func (s *Store) scanFull(sc scanner) (Todo, error) {
	if !s.pg {
		return scanTodo(sc, true)
	}
	var payload sql.NullString
	var body []byte
	t, err := scanTodoAnd(sc, &payload, &body)
	if payload.Valid {
		t.Payload = pgPayloadOut(payload.String)
	} else {
		t.Payload = string(body)
	}
	return t, err
}
