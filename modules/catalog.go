package modules

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/internal/textcut"
)

// toolNamePattern is MCP's tool-name rule, applied to the exposed name.
var toolNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)

// Tool is one module tool in the catalog.
type Tool struct {
	Name     string // exposed name, "<module>_<tool>" unless already prefixed
	Module   string
	Upstream string // the name the module advertises
	// Definition is the module's tool definition, byte for byte, with only
	// the name replaced by Name. Do not modify it.
	Definition json.RawMessage
	Hash       string // SHA-256 of the canonical upstream definition
	// Available is true when the module is up and the tool is not withheld.
	Available bool
	// Withheld is true when the definition changed since it was pinned.
	Withheld bool
	// HasOutputSchema is true when the definition declares an outputSchema.
	HasOutputSchema bool
}

// toolEntry is one selected tool of a module, as agents will see it.
type toolEntry struct {
	Name     string          // exposed, prefixed name
	Upstream string          // name the module advertises
	Def      json.RawMessage // module's definition with Name substituted
	Hash     string          // SHA-256 of the canonical upstream definition
	Withheld bool            // definition differs from the pinned one
	Output   bool            // the definition declares an outputSchema
	New      bool            // withheld as new: not listed when the module's tools were first pinned
	// Pinned is a withheld tool's pinned definition as keptDefinition wrote
	// it, or nil when the pin kept none.
	Pinned json.RawMessage
}

// exposedName prefixes an unqualified tool name with the capability name; a
// module that already namespaces its tools is not double-prefixed.
func exposedName(module, upstream string) string {
	if strings.HasPrefix(upstream, module+"_") {
		return upstream
	}
	return module + "_" + upstream
}

// RefusedTool is a tool a module advertised that the gateway cannot expose: its
// definition is not a JSON object with a name, its name is advertised twice, its
// exposed name is not a valid MCP tool name, or another tool would be exposed
// under the same name. The module's other tools are served; the refusal is logged
// and shown with the module's status.
type RefusedTool struct {
	// Upstream is the name the module advertises, shown: unprintable characters
	// escaped, its first maxShownName bytes (see shown). A definition with no
	// readable name is "(tool N of the listing)".
	Upstream string `json:"upstream"`
	Reason   string `json:"reason"`
}

// maxRefusedShown bounds the refusals a module's status keeps; past it, only their
// number (ModuleStatus.RefusedMore). A module may advertise any number of bad tools.
const maxRefusedShown = 16

// maxShownName bounds the bytes of a module-supplied name in a refusal.
const maxShownName = 128

// maxShownError bounds the bytes of a module's error text kept in its status.
const maxShownError = 1024

// shownText is s with every character that is not printable (C0 and C1 controls,
// bidi overrides) escaped as \uXXXX and every byte that is not UTF-8 as \xNN,
// cut to its first max bytes at a character boundary: safe for a terminal, the
// board and JSON, while quotes and backslashes stay as they were.
func shownText(s string, max int) string {
	s, cut := textcut.Prefix(s, max)
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			b.WriteString(s[i : i+size])
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += size
	}
	if cut {
		b.WriteString("…")
	}
	return b.String()
}

// shown makes a module-supplied string safe to print anywhere (a terminal, the log,
// the board, JSON): every character that is not printable (C0 and C1 controls,
// bidi overrides, invalid UTF-8) is escaped as strconv.Quote escapes it. Only the
// first maxShownName bytes of s are shown (cut at a character boundary).
func shown(s string) string {
	s, cut := textcut.Prefix(s, maxShownName)
	q := strconv.Quote(s)
	q = q[1 : len(q)-1]
	if cut {
		q += "…"
	}
	return q
}

// selectTools applies include_tools and prefixing to a listing. A tool that
// cannot be exposed is refused on its own (refused), so one bad definition does
// not take the module's other tools with it; tools that would share an exposed
// name are all refused, since neither can be told from the other. missing holds
// include_tools entries the module did not advertise; whether that is fatal is the
// caller's decision (it is at gateway start-up).
func selectTools(m Manifest, listed []upstreamTool) (tools []toolEntry, refused []RefusedTool, missing []string) {
	keep := func(string) bool { return true }
	if m.IncludeTools != nil {
		advertised := map[string]bool{}
		for _, t := range listed {
			advertised[t.Name] = true
		}
		for _, want := range m.IncludeTools {
			if !advertised[want] {
				missing = append(missing, want)
			}
		}
		keep = func(name string) bool { return slices.Contains(m.IncludeTools, name) }
	}
	byExposed := map[string][]string{}
	for _, t := range listed {
		if keep(t.Name) {
			name := exposedName(m.Name, t.Name)
			byExposed[name] = append(byExposed[name], t.Name)
		}
	}
	for _, t := range listed {
		if !keep(t.Name) {
			continue
		}
		refuse := func(format string, args ...any) {
			refused = append(refused, RefusedTool{Upstream: shown(t.Name), Reason: fmt.Sprintf(format, args...)})
		}
		name := exposedName(m.Name, t.Name)
		if !toolNamePattern.MatchString(name) {
			refuse(`exposed name "%s" is not a valid MCP tool name (1-128 of A-Z a-z 0-9 _ . -)`, shown(name))
			continue
		}
		if all := byExposed[name]; len(all) > 1 {
			refuse("tools %q would all be exposed as %q", all, name) // valid names: printable, at most 128 bytes
			continue
		}
		def, err := renameDef(t.Def, name)
		if err != nil {
			refuse("%s", shown(err.Error()))
			continue
		}
		if _, err := decodeTool(def); err != nil {
			refuse("definition is not an MCP tool: %s", shown(err.Error()))
			continue
		}
		schemas, err := checkSchemas(def)
		if err != nil {
			refuse("%s", err) // module text in it is shown()
			continue
		}
		hash, err := hashDef(t.Def)
		if err != nil {
			refuse("%s", shown(err.Error()))
			continue
		}
		tools = append(tools, toolEntry{Name: name, Upstream: t.Name, Def: def, Hash: hash, Output: schemas.Output != nil})
	}
	return tools, refused, missing
}

// decodeTool decodes a definition as mcp-go's Tool, as MCPTool does for agents.
func decodeTool(def json.RawMessage) (mcp.Tool, error) {
	var tool mcp.Tool
	err := json.Unmarshal(def, &tool)
	return tool, err
}

// toolSchemas are a definition's input and output schemas, raw; nil where absent
// or null.
type toolSchemas struct {
	Input  json.RawMessage `json:"inputSchema"`
	Output json.RawMessage `json:"outputSchema"`
}

func schemasOf(def json.RawMessage) (toolSchemas, error) {
	var s toolSchemas
	if err := json.Unmarshal(def, &s); err != nil {
		return toolSchemas{}, err
	}
	if string(s.Input) == "null" {
		s.Input = nil
	}
	if string(s.Output) == "null" {
		s.Output = nil
	}
	return s, nil
}

// checkSchemas refuses an input or output schema that is not an object's (MCP
// asks "type": "object" of both): the official TypeScript SDK refuses a whole
// tools/list with one such tool in it, so an agent on it would lose every tool,
// the queue's verbs too.
func checkSchemas(def json.RawMessage) (toolSchemas, error) {
	s, err := schemasOf(def)
	if err != nil {
		return toolSchemas{}, fmt.Errorf("definition: %w", err)
	}
	for _, sc := range []struct {
		name string
		raw  json.RawMessage
	}{{"inputSchema", s.Input}, {"outputSchema", s.Output}} {
		if sc.raw == nil {
			continue
		}
		var head struct {
			Type any `json:"type"`
		}
		if err := json.Unmarshal(sc.raw, &head); err != nil {
			return toolSchemas{}, fmt.Errorf("%s is not a JSON object", sc.name) // nor is it an MCP tool: not reached
		}
		if head.Type != "object" {
			return toolSchemas{}, fmt.Errorf(`%s has "type": %s, not "object" (MCP asks an object schema of it)`, sc.name, typeShown(head.Type))
		}
	}
	return s, nil
}

// typeShown is a schema's "type" as a refusal names it: a string quoted (and
// shown), else its kind.
func typeShown(v any) string {
	switch v := v.(type) {
	case nil:
		return "none"
	case string:
		return `"` + shown(v) + `"`
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	case bool:
		return "a boolean"
	default:
		return "a number"
	}
}

// renameDef replaces the value of the top-level "name" member in place, so
// every other byte of the module's definition (input schema with its
// "$schema", annotations, title, _meta, unknown extensions) is kept as sent.
func renameDef(def json.RawMessage, name string) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(def))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("definition is not a JSON object")
	}
	type span struct{ start, end int }
	var spans []span
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("definition: %w", err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("definition: %w", err)
		}
		if tok != "name" {
			continue
		}
		end := int(dec.InputOffset())
		start := end - len(v)
		if start < 0 || !bytes.Equal(def[start:end], v) {
			return nil, fmt.Errorf("definition: cannot locate the name member")
		}
		spans = append(spans, span{start, end})
	}
	if len(spans) == 0 {
		return nil, fmt.Errorf("definition has no name")
	}
	quoted, err := json.Marshal(name)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	prev := 0
	for _, s := range spans {
		out.Write(def[prev:s.start])
		out.Write(quoted)
		prev = s.end
	}
	out.Write(def[prev:])
	return out.Bytes(), nil
}

// hashDef hashes a definition in canonical form (sorted keys, no
// insignificant whitespace, numbers as written), so only a change in meaning,
// not in formatting, withholds a tool.
func hashDef(def json.RawMessage) (string, error) {
	canon, err := canonical(def, "")
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// canonical re-encodes def with its keys sorted, numbers as written and HTML
// characters as they are, each level indented by indent ("" for none): the form a
// definition is hashed in (compact) and kept in for review (indented).
func canonical(def json.RawMessage, indent string) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(def))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("definition: %w", err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", indent)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("definition: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// keptDefinition is def as a pin keeps it, for a human to compare with a later
// one: keys sorted and indented two spaces, so that neither the module's key order
// nor its spacing shows as a change. It is nil when def does not decode or is too
// large to show (maxShownDefinition).
func keptDefinition(def json.RawMessage) []byte {
	if len(def) > maxShownDefinition {
		return nil
	}
	kept, err := canonical(def, "  ")
	if err != nil || len(kept) > maxShownDefinition {
		return nil
	}
	return kept
}

// MCPTool decodes the definition for registration with mcp-go's server. The
// input and output schemas stay raw, so keys mcp-go's typed schema does not
// know ("$schema", "$defs" details, extensions) reach agents unchanged.
func (t Tool) MCPTool() (mcp.Tool, error) {
	tool, err := decodeTool(t.Definition)
	if err != nil {
		return mcp.Tool{}, fmt.Errorf("modules: decode tool %s: %w", t.Name, err)
	}
	// The exposed name is the catalog's; whatever else the definition carries
	// (encoding/json matches keys case-insensitively) never names the tool.
	tool.Name = t.Name
	schemas, err := schemasOf(t.Definition)
	if err != nil {
		return mcp.Tool{}, fmt.Errorf("modules: decode tool %s: %w", t.Name, err)
	}
	tool.InputSchema, tool.OutputSchema = mcp.ToolInputSchema{}, mcp.ToolOutputSchema{}
	tool.RawInputSchema, tool.RawOutputSchema = schemas.Input, schemas.Output
	if schemas.Input == nil {
		tool.RawInputSchema = json.RawMessage(`{"type":"object"}`)
	}
	return tool, nil
}

// maxShownDefinition bounds the definition Status carries for review: a module
// may send far larger ones, which would swell every /readyz answer and board page.
const maxShownDefinition = 64 << 10

// Reviewable is def as a human may safely be shown it, on a terminal or a page:
// every character that is not printable (C1 controls such as U+009B, which some
// terminals obey as an escape sequence; bidirectional overrides, which reorder
// what is read) is written as a \uXXXX escape instead. That is the same JSON (the
// same strings once decoded, so the same definition), but nothing in it can hide
// or rearrange text. A definition too large to show is replaced by a note.
func Reviewable(def json.RawMessage) json.RawMessage {
	if len(def) > maxShownDefinition {
		note, _ := json.Marshal(fmt.Sprintf("(a definition of %d bytes, too large to show; read it from the module's own tools/list)", len(def)))
		return note
	}
	var out []byte
	for i := 0; i < len(def); {
		r, size := utf8.DecodeRune(def[i:])
		if r == utf8.RuneError && size == 1 {
			r = 0xfffd // a byte that is not UTF-8 (0x9b is a terminal control on its own) is shown as U+FFFD
		} else if r < 0x7f || unicode.IsPrint(r) {
			if out != nil {
				out = append(out, def[i:i+size]...)
			}
			i += size
			continue
		}
		if out == nil {
			out = append(make([]byte, 0, len(def)+16), def[:i]...)
		}
		i += size
		if r > 0xffff {
			hi, lo := utf16.EncodeRune(r)
			out = fmt.Appendf(out, `\u%04x\u%04x`, hi, lo)
			continue
		}
		out = fmt.Appendf(out, `\u%04x`, r)
	}
	if out == nil {
		return def
	}
	return out
}
