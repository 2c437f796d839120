package ingest

import (
	"bytes"
	"encoding/json"
	"strings"
)

// bodyLookup reads values out of a JSON body by pointer, for the rules. It
// scans the body's bytes once and notes where the members of each object (and
// the elements of each array) on a pointer's path begin and end; it builds
// nothing but the value a pointer names (with encoding/json, decoding the
// objects on the way was a quarter of a coalesced delivery's CPU,
// BenchmarkDeliveryBurst).
//
// What it finds is what encoding/json finds: a body that is not one JSON
// value (checked whole, once) has nothing in it; of an object's members with
// the same name, the last one counts; names are compared unescaped.
type bodyLookup struct {
	body           []byte
	checked, valid bool
	parts          map[string]jsonParts // each container's parts, by the path that led to it
}

// jsonParts is what an object or array holds: its members, or its elements.
type jsonParts struct {
	members []jsonMember
	elems   [][]byte
}

type jsonMember struct {
	name, value []byte // the name with its quotes
	plain       bool   // the name needs no unescaping (see str)
	unescaped   string // a name that is not plain, unescaped once (as encoding/json would)
}

func newLookup(body []byte) *bodyLookup { return &bodyLookup{body: body} }

// maxJSONDepth is encoding/json's limit on nesting, which a body past it fails.
const maxJSONDepth = 10000

// get is the value at pointer p (numbers as json.Number); ok is false when the
// body has none there, or is not JSON.
func (l *bodyLookup) get(p []string) (any, bool) {
	if !l.checked {
		s := jsonScan{b: l.body}
		s.ws() // JSON's whitespace only: not \f, \v or U+00A0, as bytes.TrimSpace would
		l.body = l.body[s.i:]
		s = jsonScan{b: l.body}
		l.valid = s.value(0)
		l.body = l.body[:s.i]
		s.ws()
		l.valid = l.valid && s.i == len(s.b)
		l.checked, l.parts = true, map[string]jsonParts{"": s.parts}
	}
	if !l.valid {
		return nil, false
	}
	cur := l.body // the value, without the whitespace around it
	path := ""
	for _, tok := range p {
		parts, seen := l.parts[path]
		if !seen {
			s := jsonScan{b: cur}
			s.value(0) // valid: the whole body was
			parts = s.parts
			l.parts[path] = parts
		}
		var ok bool
		if cur, ok = parts.child(cur[0], tok); !ok {
			return nil, false
		}
		path += "/" + pointerEscape.Replace(tok) // a/b stays apart from a, b
	}
	return decodeValue(cur)
}

// pointerEscape writes a token as a JSON pointer does (RFC 6901), so that
// the cache's paths name one container each.
var pointerEscape = strings.NewReplacer("~", "~0", "/", "~1")

// decodeValue decodes one JSON value, numbers as json.Number. A key's parts
// are mostly plain strings and numbers, which the scan checked already: those
// are taken as they are, without a decoder.
func decodeValue(raw []byte) (any, bool) {
	if s := (jsonScan{b: raw}); len(raw) > 0 {
		switch c := raw[0]; {
		case c == '"':
			if _, plain, ok := s.str(); ok && plain && s.i == len(raw) {
				return string(raw[1 : len(raw)-1]), true
			}
		case c == '-' || (c >= '0' && c <= '9'):
			if s.number() && s.i == len(raw) {
				return json.Number(raw), true
			}
		}
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return nil, false
	}
	return v, true
}

// child is the part tok of the container that opens with kind: an object's
// last member of that name, or an array's element by index (digits only, no
// leading zero).
func (c jsonParts) child(kind byte, tok string) ([]byte, bool) {
	switch kind {
	case '{':
		for i := len(c.members) - 1; i >= 0; i-- {
			if m := c.members[i]; m.is(tok) {
				return m.value, true
			}
		}
	case '[':
		if tok == "" || len(tok) > 9 || (len(tok) > 1 && tok[0] == '0') {
			return nil, false
		}
		i := 0
		for _, c := range []byte(tok) {
			if c < '0' || c > '9' {
				return nil, false
			}
			i = i*10 + int(c-'0')
		}
		if i < len(c.elems) {
			return c.elems[i], true
		}
	}
	return nil, false
}

// jsonScan checks JSON (RFC 8259) as it walks it, and notes the parts of the
// outermost container.
type jsonScan struct {
	b     []byte
	i     int
	parts jsonParts
}

func (s *jsonScan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next reports whether the next byte is c, and steps over it if so.
func (s *jsonScan) next(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *jsonScan) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return depth < maxJSONDepth && s.object(depth+1)
	case c == '[':
		return depth < maxJSONDepth && s.array(depth+1)
	case c == '"':
		_, _, ok := s.str()
		return ok
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	}
	return false
}

func (s *jsonScan) object(depth int) bool {
	s.i++ // {
	s.ws()
	if s.next('}') {
		return true
	}
	for {
		if s.i >= len(s.b) || s.b[s.i] != '"' {
			return false
		}
		name, plain, ok := s.str()
		if !ok {
			return false
		}
		s.ws()
		if !s.next(':') {
			return false
		}
		s.ws()
		start := s.i
		if !s.value(depth) {
			return false
		}
		if depth == 1 {
			m := jsonMember{name: name, value: s.b[start:s.i], plain: plain}
			if !plain {
				json.Unmarshal(name, &m.unescaped) // a string the scan checked: mends bad UTF-8, never fails
			}
			s.parts.members = append(s.parts.members, m)
		}
		s.ws()
		if s.next(',') {
			s.ws()
			continue
		}
		return s.next('}')
	}
}

func (s *jsonScan) array(depth int) bool {
	s.i++ // [
	s.ws()
	if s.next(']') {
		return true
	}
	for {
		start := s.i
		if !s.value(depth) {
			return false
		}
		if depth == 1 {
			s.parts.elems = append(s.parts.elems, s.b[start:s.i])
		}
		s.ws()
		if s.next(',') {
			s.ws()
			continue
		}
		return s.next(']')
	}
}

// str steps over a string; raw keeps its quotes, plain says it holds neither
// an escape nor a byte past ASCII (so raw, unquoted, is the string).
func (s *jsonScan) str() (raw []byte, plain, ok bool) {
	start := s.i
	s.i++ // "
	plain = true
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return s.b[start:s.i], plain, true
		case c == '\\':
			plain = false
			if s.i+1 >= len(s.b) {
				return nil, false, false
			}
			switch s.b[s.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i += 2
			case 'u':
				if s.i+6 > len(s.b) || !isHex4(s.b[s.i+2:s.i+6]) {
					return nil, false, false
				}
				s.i += 6
			default:
				return nil, false, false
			}
		case c < 0x20:
			return nil, false, false
		default:
			if c >= 0x80 {
				plain = false
			}
			s.i++
		}
	}
	return nil, false, false
}

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

// is compares the member's name with tok as encoding/json would: unescaped,
// bad UTF-8 mended.
func (m jsonMember) is(tok string) bool {
	if m.plain {
		return string(m.name[1:len(m.name)-1]) == tok
	}
	return m.unescaped == tok
}

func (s *jsonScan) literal(word string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(word)) {
		return false
	}
	s.i += len(word)
	return true
}

// number steps over -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?.
func (s *jsonScan) number() bool {
	s.next('-')
	if s.next('0') {
		// no more digits after a leading zero
	} else if !s.digits() {
		return false
	}
	if s.next('.') && !s.digits() {
		return false
	}
	if s.next('e') || s.next('E') {
		if !s.next('+') {
			s.next('-')
		}
		return s.digits()
	}
	return true
}

// digits steps over one or more digits.
func (s *jsonScan) digits() bool {
	start := s.i
	for s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9' {
		s.i++
	}
	return s.i > start
}
