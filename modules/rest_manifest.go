package modules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// EnvRef names the environment variable that holds a credential: a manifest
// never holds the value itself.
type EnvRef struct {
	Env    string `json:"env"`
	Prefix string `json:"prefix,omitempty"` // put before the value ("Bearer ")
}

// RestAuth is a REST capability's authentication, by environment reference.
type RestAuth struct {
	Type        string `json:"type"`             // bearer, header or basic
	Env         string `json:"env,omitempty"`    // bearer, header: the variable holding the token
	Header      string `json:"header,omitempty"` // header: the header's name
	Prefix      string `json:"prefix,omitempty"` // header: put before the value
	UsernameEnv string `json:"username_env,omitempty"`
	PasswordEnv string `json:"password_env,omitempty"`
}

// Operation is one REST operation, offered as one tool: the tool's
// definition, and where the request goes.
type Operation struct {
	OperationTool
	Method string `json:"method"`
	Path   string `json:"path"`
}

// OperationTool is the part of an operation that is its tool's definition.
type OperationTool struct {
	Name         string                `json:"name"`
	Title        string                `json:"title,omitempty"`
	Description  string                `json:"description"`
	InputSchema  json.RawMessage       `json:"inputSchema"`
	OutputSchema json.RawMessage       `json:"outputSchema,omitempty"`
	Annotations  *OperationAnnotations `json:"annotations"`
}

// OperationAnnotations are an operation's MCP annotations. readOnlyHint and
// destructiveHint have no default: a REST call may do anything, and a client's
// approval prompt must not be told it is harmless by omission.
type OperationAnnotations struct {
	ReadOnlyHint    *bool `json:"readOnlyHint"`
	DestructiveHint *bool `json:"destructiveHint"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool `json:"openWorldHint,omitempty"`
}

// Where a parameter goes in the request.
const (
	inPath   = "path"
	inQuery  = "query"
	inHeader = "header"
	inBody   = "body"
)

const (
	defaultRESTTimeout  = 30 * time.Second
	maxRESTTimeout      = 10 * time.Minute
	defaultMaxResponse  = 1 << 20
	maxMaxResponse      = 64 << 20
	maxOperations       = 500
	maxOperationNameLen = 64
)

var (
	placeholder   = regexp.MustCompile(`\{([^{}]*)\}`)
	paramPattern  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,63}$`)
	headerPattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,64}$")
	opNamePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
)

// reservedHeaders are headers an argument may not set: the transport's, and
// the credential's.
var reservedHeaders = []string{"Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection",
	"Authorization", "Proxy-Authorization", "Cookie", "Te", "Trailer", "Upgrade", "Keep-Alive"}

// restOp is an operation ready to call: its parameters' places, its path's
// pieces, its compiled input schema and its tool definition.
type restOp struct {
	Operation
	in     map[string]string // parameter → path, query, header or body
	schema *jsonschema.Schema
	output *jsonschema.Schema // nil without an outputSchema
	def    json.RawMessage    // the tool definition agents see (upstream name)
}

// validateREST checks a rest manifest's own fields.
func (m Manifest) validateREST(lookup func(string) (string, bool)) error {
	if _, err := checkHTTPURL(m.BaseURL); err != nil {
		return fieldErr(m.File, "base_url", "%v", err)
	}
	if err := m.validateAuth(lookup); err != nil {
		return err
	}
	if err := m.validateHTTPLimits(); err != nil {
		return err
	}
	_, err := m.restOps()
	return err
}

func checkHTTPURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, errors.New("is required")
	}
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("is not a URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, errors.New("must be an http or https URL")
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("must name a host")
	case u.User != nil:
		return nil, errors.New("must not hold a user or password (name an environment variable in auth)")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, errors.New("must have no query or fragment")
	}
	return u, nil
}

func (m Manifest) validateHTTPLimits() error {
	if m.Timeout != "" {
		d, err := time.ParseDuration(m.Timeout)
		if err != nil || d < time.Second || d > maxRESTTimeout {
			return fieldErr(m.File, "timeout", "%q must be a duration from 1s to %s", m.Timeout, maxRESTTimeout)
		}
	}
	if m.MaxResponseBytes < 0 || m.MaxResponseBytes > maxMaxResponse {
		return fieldErr(m.File, "max_response_bytes", "must be from 1 to %d (0 or absent: %d)", maxMaxResponse, defaultMaxResponse)
	}
	return nil
}

// timeout is the manifest's timeout, or the default.
func (m Manifest) timeout() time.Duration {
	if d, err := time.ParseDuration(m.Timeout); err == nil {
		return d
	}
	return defaultRESTTimeout
}

func (m Manifest) maxResponse() int64 {
	if m.MaxResponseBytes > 0 {
		return m.MaxResponseBytes
	}
	return defaultMaxResponse
}

func (m Manifest) validateAuth(lookup func(string) (string, bool)) error {
	a := m.Auth
	if a == nil {
		return nil
	}
	check := func(field, name string) error {
		if err := checkEnvName(name, lookup); err != nil {
			return fieldErr(m.File, "auth."+field, "%v", err)
		}
		return nil
	}
	extra := func(fields map[string]string) error {
		if f := presentFields(fields); len(f) > 0 {
			return fieldErr(m.File, "auth."+f[0], "is not a field of %q auth", a.Type)
		}
		return nil
	}
	switch a.Type {
	case "bearer":
		if err := extra(map[string]string{"header": a.Header, "prefix": a.Prefix,
			"username_env": a.UsernameEnv, "password_env": a.PasswordEnv}); err != nil {
			return err
		}
		return check("env", a.Env)
	case "header":
		if err := extra(map[string]string{"username_env": a.UsernameEnv, "password_env": a.PasswordEnv}); err != nil {
			return err
		}
		if !headerPattern.MatchString(a.Header) || isReservedHeader(a.Header) && !strings.EqualFold(a.Header, "Authorization") {
			return fieldErr(m.File, "auth.header", "%q must be a header name, not one the transport sets", a.Header)
		}
		return check("env", a.Env)
	case "basic":
		if err := extra(map[string]string{"env": a.Env, "header": a.Header, "prefix": a.Prefix}); err != nil {
			return err
		}
		if err := check("username_env", a.UsernameEnv); err != nil {
			return err
		}
		return check("password_env", a.PasswordEnv)
	}
	return fieldErr(m.File, "auth.type", "%q must be bearer, header or basic", a.Type)
}

func presentFields(fields map[string]string) []string {
	var out []string
	for k, v := range fields {
		if v != "" {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func isReservedHeader(name string) bool {
	return slices.ContainsFunc(reservedHeaders, func(h string) bool { return strings.EqualFold(h, name) })
}

// restOps validates and compiles every operation.
func (m Manifest) restOps() ([]*restOp, error) {
	if len(m.Operations) == 0 || len(m.Operations) > maxOperations {
		return nil, fieldErr(m.File, "operations", "must list 1 to %d operations", maxOperations)
	}
	var ops []*restOp
	seen := map[string]bool{}
	for i, op := range m.Operations {
		field := fmt.Sprintf("operations[%d]", i)
		if seen[op.Name] {
			return nil, fieldErr(m.File, field+".name", "%q is used by another operation", op.Name)
		}
		seen[op.Name] = true
		ro, err := compileOp(m, op)
		if err != nil {
			var fe *opFieldError
			if errors.As(err, &fe) {
				return nil, fieldErr(m.File, field+"."+fe.field, "%s", fe.msg)
			}
			return nil, fieldErr(m.File, field, "%v", err)
		}
		ops = append(ops, ro)
	}
	return ops, nil
}

type opFieldError struct{ field, msg string }

func (e *opFieldError) Error() string { return e.field + ": " + e.msg }

func opErr(field, format string, args ...any) error {
	return &opFieldError{field, fmt.Sprintf(format, args...)}
}

func compileOp(m Manifest, op Operation) (*restOp, error) {
	if !opNamePattern.MatchString(op.Name) {
		return nil, opErr("name", "%q must match %s", op.Name, opNamePattern)
	}
	if name := exposedName(m.Name, op.Name); !toolNamePattern.MatchString(name) {
		return nil, opErr("name", "%q would be exposed as %q, which is not a valid MCP tool name", op.Name, name)
	}
	if strings.TrimSpace(op.Description) == "" || len(op.Description) > maxDesc {
		return nil, opErr("description", "must be 1 to %d characters", maxDesc)
	}
	if len(op.Title) > maxTitle {
		return nil, opErr("title", "must be at most %d characters", maxTitle)
	}
	switch op.Method {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return nil, opErr("method", "%q must be GET, HEAD, POST, PUT, PATCH or DELETE", op.Method)
	}
	if op.Annotations == nil {
		return nil, opErr("annotations", "is required (readOnlyHint and destructiveHint, at least)")
	}
	if op.Annotations.ReadOnlyHint == nil {
		return nil, opErr("annotations.readOnlyHint", "is required: say whether the operation changes anything")
	}
	if op.Annotations.DestructiveHint == nil {
		return nil, opErr("annotations.destructiveHint", "is required: say whether the operation may destroy anything")
	}
	ro := &restOp{Operation: op}
	shown, err := ro.compileInput()
	if err != nil {
		return nil, err
	}
	if err := ro.checkPath(); err != nil {
		return nil, err
	}
	if op.OutputSchema != nil {
		var err error
		if ro.output, err = compileSchema(op.OutputSchema); err != nil {
			return nil, opErr("outputSchema", "%v", err)
		}
	}
	def, err := ro.definition(shown)
	if err != nil {
		return nil, err
	}
	ro.def = def
	return ro, nil
}

// compileInput reads each property's "in", checks the bindings, compiles the
// schema, and returns it as agents see it: without the "in" members.
func (ro *restOp) compileInput() (json.RawMessage, error) {
	var schema map[string]json.RawMessage
	if err := json.Unmarshal(ro.InputSchema, &schema); err != nil || schema == nil {
		return nil, opErr("inputSchema", "must be a JSON Schema object")
	}
	var props map[string]map[string]json.RawMessage
	if raw, ok := schema["properties"]; ok {
		if err := json.Unmarshal(raw, &props); err != nil {
			return nil, opErr("inputSchema.properties", "must map each parameter to its schema")
		}
	}
	ro.in = map[string]string{}
	for name, p := range props {
		field := "inputSchema.properties." + name
		if !paramPattern.MatchString(name) {
			return nil, opErr(field, "%q must match %s", name, paramPattern)
		}
		var in string
		if err := json.Unmarshal(p["in"], &in); err != nil || in == "" {
			return nil, opErr(field+".in", "is required: path, query, header or body")
		}
		switch in {
		case inPath, inQuery, inBody:
		case inHeader:
			if !headerPattern.MatchString(name) || isReservedHeader(name) {
				return nil, opErr(field+".in", "%q cannot be a header an argument sets", name)
			}
		default:
			return nil, opErr(field+".in", "%q must be path, query, header or body", in)
		}
		if in == inBody && (ro.Method == http.MethodGet || ro.Method == http.MethodHead) {
			return nil, opErr(field+".in", "a %s request has no body", ro.Method)
		}
		if err := checkSendable(field, in, p); err != nil {
			return nil, err
		}
		ro.in[name] = in
		delete(p, "in")
	}
	if props != nil {
		b, err := json.Marshal(props)
		if err != nil {
			return nil, opErr("inputSchema", "%v", err)
		}
		schema["properties"] = b
	}
	shown, err := json.Marshal(schema)
	if err != nil {
		return nil, opErr("inputSchema", "%v", err)
	}
	if err := checkObjectSchema("inputSchema", shown); err != nil {
		return nil, err
	}
	if ro.schema, err = compileSchema(shown); err != nil {
		return nil, opErr("inputSchema", "%v", err)
	}
	return shown, nil
}

// checkSendable refuses a path, query or header argument whose type could
// never be sent (each is text: a query argument may also be a list, which
// repeats it); a type left open is checked when called.
func checkSendable(field, in string, prop map[string]json.RawMessage) error {
	if in == inBody {
		return nil
	}
	refused := []string{"object", "array"}
	if in == inQuery {
		refused = refused[:1]
		var items map[string]json.RawMessage
		if json.Unmarshal(prop["items"], &items) == nil {
			for _, t := range []string{"object", "array"} {
				if hasType(items["type"], t) {
					return opErr(field+".items.type", "a query argument's items cannot be %ss: each is sent as text", t)
				}
			}
		}
	}
	for _, t := range refused {
		if hasType(prop["type"], t) {
			return opErr(field+".type", "a %s argument cannot be an %s: it is sent as text", in, t)
		}
	}
	return nil
}

// hasType reports whether a schema's "type" (a name or a list of them) names t.
func hasType(raw json.RawMessage, t string) bool {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one == t
	}
	var list []string
	return json.Unmarshal(raw, &list) == nil && slices.Contains(list, t)
}

// checkPath checks the path template against the bindings: every {name} is a
// path parameter, every path parameter is in the template and required.
func (ro *restOp) checkPath() error {
	p := ro.Path
	if !strings.HasPrefix(p, "/") || strings.ContainsAny(p, "?#") || strings.Contains(p, "//") {
		return opErr("path", "%q must start with / and hold no query, fragment or empty segment", p)
	}
	used := map[string]bool{}
	for _, m := range placeholder.FindAllStringSubmatch(p, -1) {
		name := m[1]
		if ro.in[name] != inPath {
			return opErr("path", "{%s} names no inputSchema property with \"in\": \"path\"", name)
		}
		used[name] = true
	}
	if rest := placeholder.ReplaceAllString(p, ""); strings.ContainsAny(rest, "{}") {
		return opErr("path", "%q has an unbalanced { or }", p)
	}
	var head struct {
		Required []string `json:"required"`
	}
	_ = json.Unmarshal(ro.InputSchema, &head)
	required := head.Required
	for name, in := range ro.in {
		if in != inPath {
			continue
		}
		if !used[name] {
			return opErr("inputSchema.properties."+name+".in", "path parameter {%s} is not in the path %q", name, p)
		}
		if !slices.Contains(required, name) {
			return opErr("inputSchema.required", "must list the path parameter %q", name)
		}
	}
	return nil
}

// restRequestMeta is the _meta key of a REST operation's request.
const restRequestMeta = "switchboard/request"

// definition is the tool definition of the operation, its name the
// operation's (the catalog prefixes it as it does a module's).
//
// Its _meta holds the request the operation makes (method, path and where
// each argument goes): it is part of what is pinned, so an operation that
// sends another request waits for approval as a changed description does.
func (ro *restOp) definition(input json.RawMessage) (json.RawMessage, error) {
	type request struct {
		Method string            `json:"method"`
		Path   string            `json:"path"`
		In     map[string]string `json:"in"`
	}
	def := struct {
		OperationTool
		Meta map[string]request `json:"_meta"`
	}{ro.OperationTool, map[string]request{restRequestMeta: {ro.Method, ro.Path, ro.in}}}
	def.InputSchema = input
	b, err := json.Marshal(def)
	if err != nil {
		return nil, opErr("", "%v", err)
	}
	if _, err := checkSchemas(b); err != nil {
		return nil, opErr("outputSchema", "%v", err)
	}
	return b, nil
}

func checkObjectSchema(field string, raw json.RawMessage) error {
	var head struct {
		Type any `json:"type"`
	}
	if err := json.Unmarshal(raw, &head); err != nil || head.Type != "object" {
		return opErr(field, `must have "type": "object"`)
	}
	return nil
}

// noLoader refuses every $ref outside the schema: a manifest's schema is
// read whole from the manifest, never from a file or the network.
type noLoader struct{}

func (noLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("a schema may refer only to itself, not to %s", u)
}

func compileSchema(raw json.RawMessage) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	const loc = "switchboard:operation.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	return c.Compile(loc)
}
