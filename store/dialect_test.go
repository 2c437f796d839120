package store

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestToPostgres(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{`SELECT id FROM todos WHERE queue = ? AND id > ?`, `SELECT id FROM todos WHERE queue = $1 AND id > $2`},
		{`SELECT id FROM todos INDEXED BY todos_claimable WHERE queue = ?`, `SELECT id FROM todos WHERE queue = $1`},
		{`SELECT id FROM todos NOT INDEXED WHERE id = ?`, `SELECT id FROM todos WHERE id = $1`},
		{`INSERT OR IGNORE INTO settings (name, value) VALUES (?, ?)`,
			`INSERT INTO settings (name, value) VALUES ($1, $2) ON CONFLICT DO NOTHING`},
		{`DELETE FROM web_sessions WHERE human_id = ? AND token_hash IS NOT ?`,
			`DELETE FROM web_sessions WHERE human_id = $1 AND token_hash IS DISTINCT FROM $2`},
		{`SELECT 1 WHERE a IS ?`, `SELECT 1 WHERE a IS NOT DISTINCT FROM $1`},
		{`SELECT 1 WHERE a IS NULL AND b IS NOT NULL`, `SELECT 1 WHERE a IS NULL AND b IS NOT NULL`},
		{`WHERE w.id = CAST(? AS INTEGER)`, `WHERE w.id = CAST($1 AS BIGINT)`},
		{`SELECT CAST(body AS TEXT) FROM webhook_events`, `SELECT convert_from(body, 'UTF8') FROM webhook_events`},
		// A ? inside a string literal is text, not a placeholder.
		{`SELECT '?' || ?, "a?b"`, `SELECT '?' || $1, "a?b"`},
		{`last_error LIKE ? ESCAPE '\'`, `last_error LIKE $1 ESCAPE '\'`},
	} {
		if got := toPostgres(c.in); got != c.want {
			t.Errorf("toPostgres(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestPgTextKeepsTextStorable(t *testing.T) {
	args := []any{"plain", "nul\x00here", "bad\xffbyte", []byte("raw\x00"), int64(7)}
	pgText(args)
	want := []any{"plain", "nul\uFFFDhere", "bad\uFFFDbyte"}
	for i, w := range want {
		if args[i] != w {
			t.Errorf("arg %d = %q, want %q", i, args[i], w)
		}
	}
	if string(args[3].([]byte)) != "raw\x00" || args[4] != int64(7) {
		t.Errorf("bytes and numbers changed: %v", args[3:])
	}
}

// Text that is not UTF-8 is stored on PostgreSQL as encoding/json writes what
// SQLite keeps: one U+FFFD for each byte that is not part of a character, and
// for a NUL.
func TestPgTextReadsAsJSONWritesIt(t *testing.T) {
	for _, s := range []string{"desc \xff\xfe end", "a\x00b", "\xe2\x82", "ok é \uFFFD", "\xf0\x9f\x98\x80\xf0\x9f"} {
		args := []any{s}
		pgText(args)
		got := args[0].(string)
		if !utf8.ValidString(got) || strings.IndexByte(got, 0) >= 0 {
			t.Errorf("pgText(%q) = %q, not storable", s, got)
		}
		// What a JSON reader gets of SQLite's bytes (a NUL aside, which
		// PostgreSQL cannot hold).
		b, _ := json.Marshal(strings.ReplaceAll(s, "\x00", "\uFFFD"))
		var want string
		if err := json.Unmarshal(b, &want); err != nil || got != want {
			t.Errorf("pgText(%q) = %q, a JSON reader of SQLite's gets %q", s, got, want)
		}
	}
}
