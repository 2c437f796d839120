// Package pretty readies bytes that someone else wrote (a todo's payload or
// result, a delivery's body) for a person to read, on the board or in a terminal.
// Those bytes may have been made to be expensive: what it returns, and the work
// it does to make it, stay within a small multiple of the bounds below whatever
// the input is. It must never indent without these bounds, nor hold on to its
// input.
package pretty

import (
	"encoding/json"
	"strings"

	"github.com/switchboardhq/switchboard/internal/textcut"
)

const (
	// MaxIndent is the largest input that is indented: above it, the text is
	// shown as it came.
	MaxIndent = 64 << 10
	// MaxDepth is how deep JSON may nest and still be indented. Indentation grows
	// with depth, so deep nesting is what turns kilobytes into megabytes.
	MaxDepth = 20
	// MaxOutput bounds what is shown: indented JSON longer than this is shown as
	// it came instead, and a text longer than this is cut.
	MaxOutput = 256 << 10
	// growth and slack bound indented JSON at growth times its input's length
	// and slack bytes more. Ordinary JSON indents to two or three times its
	// length; more is a sign of nesting made to be expensive. A short document
	// nested a little may grow more: slack lets it.
	growth = 8
	slack  = 4 << 10
)

// Text is what to show of an input.
type Text struct {
	Body string // the input indented (JSON), the input as it came, or its first part (Cut)
	JSON bool   // Body is the input's JSON, indented
	Cut  bool   // Body is the input's first MaxOutput bytes or fewer, not all of it
	Size int    // the input's length in bytes
}

// Format indents s when it is a JSON object or array within the bounds, and
// otherwise gives it as it came, cut to MaxOutput bytes at a character's edge.
func Format(s string) Text {
	if body, ok := indent(strings.TrimSpace(s)); ok {
		return Text{Body: body, JSON: true, Size: len(s)}
	}
	return Raw(s)
}

// Raw gives s as it came, cut to MaxOutput bytes at a character's edge: for a
// text that is not to be indented.
func Raw(s string) Text {
	t := Text{Body: s, Size: len(s)}
	if len(s) > MaxOutput {
		t.Body, t.Cut = textcut.Prefix(s, MaxOutput)
	}
	return t
}

// indent writes s as json.Indent(…, "", "  ") would, or reports false when s is
// not a JSON object or array, or is over a bound. It stops as soon as the output
// or the depth passes its bound, so its work is linear in min(len(s), MaxIndent).
func indent(s string) (string, bool) {
	if s == "" || len(s) > MaxIndent || (s[0] != '{' && s[0] != '[') || !json.Valid([]byte(s)) {
		return "", false
	}
	limit := min(MaxOutput, growth*len(s)+slack)
	var b strings.Builder
	b.Grow(min(limit, 2*len(s)))
	newline := func(depth int) {
		b.WriteByte('\n')
		for range depth {
			b.WriteString("  ")
		}
	}
	depth, inString, escaped, opened := 0, false, false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			b.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			continue
		}
		if opened {
			// Whether a bracket's contents go on a line of their own waits on what
			// follows it: an empty object or array stays "{}" or "[]".
			opened = false
			if c == '}' || c == ']' {
				depth--
				b.WriteByte(c)
				continue
			}
			newline(depth)
		}
		switch c {
		case '{', '[':
			if depth++; depth > MaxDepth {
				return "", false
			}
			b.WriteByte(c)
			opened = true
		case '}', ']':
			depth--
			newline(depth)
			b.WriteByte(c)
		case ',':
			b.WriteByte(c)
			newline(depth)
		case ':':
			b.WriteString(": ")
		case '"':
			inString = true
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
		if b.Len() > limit {
			return "", false
		}
	}
	return b.String(), true
}
