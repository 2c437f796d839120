package agent

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// envelopeMembers and paramsMembers are the members the fast paths read, of a
// message and of its params; the index of each is its bit in plainObject's mask.
var (
	envelopeMembers = []string{"jsonrpc", "id", "method", "params"}
	paramsMembers   = []string{"name", "arguments", "_meta", "task", "inputResponses", "requestState"}
)

// plainMembers reports whether a message (valid JSON, as readEnvelope found it)
// is an object whose members, and its params' members, are each one the fast
// paths read, given once and spelt without escapes. mcp-go refuses a message
// that gives a member twice, or spells one in another case (which encoding/json
// would take for it), and reads members the fast paths do not know: the fast
// paths leave all of those to mcp-go.
func plainMembers(b []byte) bool {
	i, ok := plainObject(b, skipSpace(b, 0), envelopeMembers, paramsMembers)
	return ok && skipSpace(b, i) == len(b)
}

// plainObject checks the object at b[i] against names (and its params member's,
// when params is not nil, against params) and returns the index past it.
func plainObject(b []byte, i int, names, params []string) (int, bool) {
	var seen uint
	end := eachMember(b, i, func(name []byte, at int) int {
		k := -1
		for n, known := range names {
			if string(name[1:len(name)-1]) == known {
				k = n
				break
			}
		}
		if k < 0 || seen&(1<<k) != 0 {
			return -1
		}
		seen |= 1 << k
		if params != nil && names[k] == "params" {
			end, _ := plainObject(b, at, params, nil)
			return end
		}
		return skipValue(b, at)
	})
	return end, end >= 0
}

// eachMember walks the members of the object at b[i] (valid JSON): each is
// given a member's name as written (quotes, escapes and all) and the index of
// its value, and returns the index past the value, or -1 to stop. eachMember
// returns the index past the object, or -1 when each stopped or b[i] is not an
// object. plainObject and checkNames are its two readers.
func eachMember(b []byte, i int, each func(name []byte, at int) int) int {
	if i >= len(b) || b[i] != '{' {
		return -1
	}
	for i = skipSpace(b, i+1); i < len(b) && b[i] == '"'; {
		end := skipString(b, i)
		colon := skipSpace(b, end)
		if colon >= len(b) || b[colon] != ':' {
			return -1
		}
		if i = each(b[i:end], skipSpace(b, colon+1)); i < 0 {
			return -1
		}
		if i = skipSpace(b, i); i < len(b) && b[i] == ',' {
			i = skipSpace(b, i+1)
		}
	}
	if i < len(b) && b[i] == '}' {
		return i + 1
	}
	return -1
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index past the string that starts at b[i], or len(b).
func skipString(b []byte, i int) int {
	for i++; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(b)
}

// skipValue returns the index past the value that starts at b[i].
func skipValue(b []byte, i int) int {
	depth := 0
	for ; i < len(b); i++ {
		switch b[i] {
		case '"':
			i = skipString(b, i) - 1
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i
			}
			depth--
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i
			}
		}
		if depth == 0 && (b[i] == '"' || b[i] == '}' || b[i] == ']') {
			return i + 1
		}
	}
	return i
}

// protocolMembers and protocolParamsMembers are the members of a message, and
// of its params, that the protocol defines and mcp-go reads (memberProblem).
var (
	protocolMembers       = []string{"jsonrpc", "method", "id", "params", "result", "error"}
	protocolParamsMembers = []string{"name", "arguments", "uri", "cursor", "_meta", "protocolVersion",
		"capabilities", "clientInfo", "level", "ref", "argument", "requestId", "progressToken", "taskId",
		"reason", "requestState", "task", "context", "inputResponses", "notifications", "progress", "total",
		"message"}
)

// memberProblem is mcp-go's refusal of a message (valid JSON) that gives one of
// the protocol's members, of the message or of its params, twice, or spells one
// in another case or Unicode folding, which encoding/json would read as the
// member; nil for any other. The agent answers some requests itself
// (checkModern, subscriptions/listen) and refuses those as mcp-go would.
func memberProblem(b []byte) error {
	_, err := checkNames(b, skipSpace(b, 0), protocolMembers, "")
	return err
}

// checkNames checks the names of the object at b[i] against defined (and its
// params member's, at the top, against protocolParamsMembers) and returns the
// index past it. A value that is not an object is passed over.
func checkNames(b []byte, i int, defined []string, path string) (int, error) {
	if i >= len(b) || b[i] != '{' {
		return skipValue(b, i), nil
	}
	var seen []string
	var problem error
	end := eachMember(b, i, func(name []byte, at int) int {
		key := string(name[1 : len(name)-1])
		if strings.IndexByte(key, '\\') >= 0 && json.Unmarshal(name, &key) != nil {
			return -1
		}
		switch {
		case slices.Contains(seen, key):
			problem = fmt.Errorf("duplicate member %q", path+key)
			return -1
		case slices.Contains(defined, key):
			seen = append(seen, key)
		default:
			for _, known := range defined {
				if strings.EqualFold(key, known) {
					problem = fmt.Errorf("member %q is not the defined name %q", path+key, path+known)
					return -1
				}
			}
		}
		if path == "" && key == "params" {
			end, err := checkNames(b, at, protocolParamsMembers, "params.")
			if err != nil {
				problem = err
				return -1
			}
			return end
		}
		return skipValue(b, at)
	})
	if problem != nil {
		return 0, problem
	}
	if end < 0 {
		return len(b), nil
	}
	return end, nil
}
