// Package textcut shortens text for a log line, an error, an audit row or a page,
// never splitting a UTF-8 character, and makes text that is not UTF-8 into text
// that is (Valid). It is the one home of those rules; pretty lays out JSON and
// uses it.
package textcut

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Ellipsis marks a text that was cut, so that it does not read as whole.
const Ellipsis = "…"

// Prefix returns s's first n bytes or fewer, not splitting a character, and
// whether anything was cut.
func Prefix(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	if n <= 0 {
		return "", true
	}
	end := n
	// A character is at most utf8.UTFMax bytes: step back over its continuation
	// bytes to its start.
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(s[i]) {
			end = i
			break
		}
	}
	return s[:end], true
}

// Bytes shortens s to at most n bytes, the Ellipsis included when it is cut: for
// a column or a message with a size bound.
func Bytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut, _ := Prefix(s, n-len(Ellipsis))
	return cut + Ellipsis
}

// Runes shortens s to at most n characters, the Ellipsis included when it is cut,
// with no space left before it: for a line a reader sees.
func Runes(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return strings.TrimRightFunc(string(r[:max(n-1, 0)]), unicode.IsSpace) + Ellipsis
}

// Valid is s with a NUL, and each byte that is not part of a UTF-8 character,
// replaced by U+FFFD, one for each byte: what encoding/json writes of such
// bytes, so that text kept as bytes (SQLite) and text kept valid (PostgreSQL)
// read the same.
func Valid(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == 0 || (r == utf8.RuneError && size == 1) {
			r = utf8.RuneError
		}
		b.WriteRune(r)
		i += size
	}
	return b.String()
}
