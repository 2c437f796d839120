package store

import (
	"github.com/switchboardhq/switchboard/internal/textcut"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"
)

// The store speaks two SQL dialects: SQLite's (the default, an embedded file) and
// PostgreSQL's (a server a team already runs). Queries are written once, in SQLite's
// spelling, beside the Go that runs them. What differs only in spelling is translated
// here, once per query text, when the query is prepared:
//
//   - placeholders: ? becomes $1, $2, …;
//   - planner hints: INDEXED BY name and NOT INDEXED go (PostgreSQL plans alone);
//   - INSERT OR IGNORE INTO … becomes INSERT INTO … ON CONFLICT DO NOTHING;
//   - a IS ? and a IS NOT ? become IS [NOT] DISTINCT FROM (PostgreSQL's IS takes
//     only NULL, TRUE and FALSE);
//   - CAST(x AS INTEGER) becomes CAST(x AS BIGINT), and CAST(body AS TEXT) (a
//     blob read as text) becomes convert_from(body, 'UTF8').
//
// What differs in meaning is written out twice, beside each other, under
// s.pg: claims (FOR UPDATE SKIP LOCKED), row locks before a lease is checked, id
// allocation, schema introspection. Nothing else is rewritten.

type dialect uint8

const (
	sqliteDialect dialect = iota
	postgresDialect
)

var (
	hintRE     = regexp.MustCompile(`\s+(INDEXED BY\s+\w+|NOT INDEXED)\b`)
	isParamRE  = regexp.MustCompile(`\bIS (NOT )?\?`)
	castIntRE  = regexp.MustCompile(`\bAS INTEGER\)`)
	castBlobRE = regexp.MustCompile(`CAST\((\w+(?:\.\w+)?) AS TEXT\)`)
	orIgnoreRE = regexp.MustCompile(`^(\s*)INSERT OR IGNORE INTO\b`)
)

// pgQueries caches translations: a query text is translated once per process.
var pgQueries sync.Map

// toPostgres translates a query written for SQLite into PostgreSQL's spelling.
func toPostgres(q string) string {
	if v, ok := pgQueries.Load(q); ok {
		return v.(string)
	}
	out := hintRE.ReplaceAllString(q, "")
	out = isParamRE.ReplaceAllStringFunc(out, func(m string) string {
		if strings.Contains(m, "NOT") {
			return "IS DISTINCT FROM ?"
		}
		return "IS NOT DISTINCT FROM ?"
	})
	out = castIntRE.ReplaceAllString(out, "AS BIGINT)")
	out = castBlobRE.ReplaceAllString(out, "convert_from($1, 'UTF8')")
	if orIgnoreRE.MatchString(out) {
		out = orIgnoreRE.ReplaceAllString(out, "${1}INSERT INTO")
		if i := strings.LastIndex(out, " RETURNING "); i >= 0 {
			out = out[:i] + " ON CONFLICT DO NOTHING" + out[i:]
		} else {
			out = strings.TrimRight(out, " \t\n;") + " ON CONFLICT DO NOTHING"
		}
	}
	out = numberParams(out)
	pgQueries.Store(q, out)
	return out
}

// numberParams turns each ? outside a quoted string into $1, $2, ….
func numberParams(q string) string {
	if !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	var quote byte
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case c == '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// unmatchable reports whether a filter's texts can match no stored row because
// one is not UTF-8 or holds a NUL byte, on PostgreSQL, which refuses to compare
// such text (and stores none: see pgText): the listing is empty, rather than an
// error. A nil pointer is no text.
func (s *Store) unmatchable(texts ...*string) bool {
	if !s.pg {
		return false
	}
	for _, t := range texts {
		if t != nil && !storable(*t) {
			return true
		}
	}
	return false
}

// storable reports whether PostgreSQL's text holds s as it is: UTF-8 with no
// NUL byte.
func storable(s string) bool {
	return strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}

// q is query in this store's dialect.
func (s *Store) q(query string) string {
	if s.pg {
		return toPostgres(query)
	}
	return query
}

// boolInt stores a flag as the 0 or 1 both dialects keep in an integer column
// (pgx, unlike SQLite, will not write a Go bool into one).
func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// pgText makes each string argument storable in a PostgreSQL text column, which
// holds no NUL byte and only valid UTF-8 (SQLite keeps any bytes): a NUL becomes
// U+FFFD, as does each invalid sequence. Text a worker or a provider sends (an
// error, a result, a header) is kept, not refused, and reads back the same on
// both backends whenever it is text. Bytes that must stay bytes go as []byte.
func pgText(args []any) {
	for i, a := range args {
		if s, ok := a.(string); ok && !storable(s) {
			args[i] = textcut.Valid(s)
		}
	}
}
