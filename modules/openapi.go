package modules

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// ImportOptions say what ImportOpenAPI writes.
type ImportOptions struct {
	Name       string   // the capability's name
	BaseURL    string   // overrides the document's first server URL
	Operations []string // operationIds to import; nil: every one that can be
}

// Skipped is an operation left out, and why; with no Operation, something the
// document asks that the manifest leaves out (its credential).
type Skipped struct{ Operation, Reason string }

// maxSchemaDepth bounds how deep $refs are written out inline: a recursive
// schema (a tree of categories) stops there with an open schema ({}).
const maxSchemaDepth = 8

// ImportOpenAPI reads an OpenAPI 3 document and writes a rest manifest of its
// operations, for an operator to review (the annotations are guesses from the
// method, the credential's variable a suggested name). External $refs are
// refused: the document is read alone. It returns the manifest's JSON and the
// operations it left out.
func ImportOpenAPI(ctx context.Context, spec []byte, opts ImportOptions) ([]byte, []Skipped, error) {
	if !namePattern.MatchString(opts.Name) {
		return nil, nil, fmt.Errorf("--name %q must match %s", opts.Name, namePattern)
	}
	loader := openapi3.NewLoader()
	loader.IsExternalRefsAllowed = false
	loader.Context = ctx
	doc, err := loader.LoadFromData(spec)
	if err != nil {
		return nil, nil, fmt.Errorf("read the OpenAPI document: %w", err)
	}
	if err := doc.Validate(ctx); err != nil {
		return nil, nil, fmt.Errorf("the OpenAPI document is not valid: %w", err)
	}
	im := &importer{doc: doc, opts: opts, wanted: map[string]bool{}}
	for _, id := range opts.Operations {
		im.wanted[id] = true
	}
	if im.components, err = genericSchemas(doc); err != nil {
		return nil, nil, err
	}
	return im.manifest()
}

type importer struct {
	doc        *openapi3.T
	opts       ImportOptions
	wanted     map[string]bool
	components map[string]any // components.schemas, as JSON values
	authHeader string         // the header the credential goes in, which no argument may set
	skipped    []Skipped
}

func genericSchemas(doc *openapi3.T) (map[string]any, error) {
	out := map[string]any{}
	if doc.Components == nil {
		return out, nil
	}
	b, err := json.Marshal(doc.Components.Schemas)
	if err != nil {
		return nil, err
	}
	return out, json.Unmarshal(b, &out)
}

// serverURL is a server's URL with each {variable} its default.
func serverURL(srv *openapi3.Server) string {
	u := srv.URL
	for name, v := range srv.Variables {
		if v != nil {
			u = strings.ReplaceAll(u, "{"+name+"}", v.Default)
		}
	}
	return u
}

func (im *importer) manifest() ([]byte, []Skipped, error) {
	base := im.opts.BaseURL
	if base == "" && len(im.doc.Servers) > 0 {
		base = serverURL(im.doc.Servers[0])
	}
	if _, err := checkHTTPURL(base); err != nil {
		return nil, nil, fmt.Errorf("base URL %q %v; give one with --base-url", base, err)
	}
	auth := im.auth()
	ops, found := im.operations()
	for _, id := range im.opts.Operations {
		if !found[id] {
			return nil, nil, fmt.Errorf("--operations: the document has no operation %q", id)
		}
	}
	for _, s := range im.skipped {
		if im.wanted[s.Operation] {
			return nil, nil, fmt.Errorf("--operations: %s cannot be imported: %s", s.Operation, s.Reason)
		}
	}
	if len(ops) == 0 {
		return nil, im.skipped, errors.New("no operation could be imported")
	}
	out := struct {
		Version     int         `json:"version"`
		Type        string      `json:"type"`
		Name        string      `json:"name"`
		Title       string      `json:"title"`
		Description string      `json:"description"`
		Risk        string      `json:"risk"`
		BaseURL     string      `json:"base_url"`
		Auth        *RestAuth   `json:"auth,omitempty"`
		Operations  []Operation `json:"operations"`
	}{manifestVersion, TypeREST, im.opts.Name, cut(im.doc.Info.Title, maxTitle), im.description(), risk(ops),
		strings.TrimSuffix(base, "/"), auth, ops}
	b, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	// What is written must load (but for the credential's variable, which
	// the operator sets).
	m, err := decodeManifest(im.opts.Name+".json", b)
	if err == nil {
		err = m.validateREST(func(string) (string, bool) { return "set", true })
	}
	if err != nil {
		return nil, nil, fmt.Errorf("the manifest written would not load: %w", err)
	}
	return append(b, '\n'), im.skipped, nil
}

func (im *importer) description() string {
	d := strings.TrimSpace(im.doc.Info.Description)
	if d == "" {
		d = im.doc.Info.Title
	}
	return cut(d, maxDesc)
}

func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }

// auth picks the first security scheme (by name) a rest manifest can say:
// bearer, basic, or an API key in a header. The variable names are
// suggestions, <NAME>_TOKEN and the like.
func (im *importer) auth() *RestAuth {
	if im.doc.Components == nil {
		return nil
	}
	prefix := strings.ToUpper(im.opts.Name)
	for _, name := range slices.Sorted(maps.Keys(im.doc.Components.SecuritySchemes)) {
		s := im.doc.Components.SecuritySchemes[name].Value
		switch {
		case s == nil:
		case s.Type == "http" && strings.EqualFold(s.Scheme, "bearer"):
			im.authHeader = "Authorization"
			return &RestAuth{Type: "bearer", Env: prefix + "_TOKEN"}
		case s.Type == "http" && strings.EqualFold(s.Scheme, "basic"):
			im.authHeader = "Authorization"
			return &RestAuth{Type: "basic", UsernameEnv: prefix + "_USERNAME", PasswordEnv: prefix + "_PASSWORD"}
		case s.Type == "apiKey" && s.In == "header":
			im.authHeader = s.Name
			return &RestAuth{Type: "header", Header: s.Name, Env: prefix + "_API_KEY"}
		}
	}
	var unfit []string
	for _, name := range slices.Sorted(maps.Keys(im.doc.Components.SecuritySchemes)) {
		if s := im.doc.Components.SecuritySchemes[name].Value; s != nil {
			unfit = append(unfit, fmt.Sprintf("%q (%s)", name, strings.TrimSpace(s.Type+" "+s.In+" "+s.Scheme)))
		}
	}
	if len(unfit) > 0 {
		// An operation's Skipped names it; this one is the document's.
		im.skipped = append(im.skipped, Skipped{Reason: "the manifest sends no credential: no security scheme of the " +
			"document is a bearer token, basic auth or an API key in a header: " + strings.Join(unfit, ", ")})
	}
	return nil
}

var methodOrder = []string{http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete}

// operations converts every operation (those wanted) in path order.
func (im *importer) operations() ([]Operation, map[string]bool) {
	var ops []Operation
	found := map[string]bool{}
	names := map[string]bool{}
	for _, path := range slices.Sorted(maps.Keys(im.doc.Paths.Map())) {
		item := im.doc.Paths.Value(path)
		for _, method := range methodOrder {
			op := item.GetOperation(method)
			if op == nil {
				continue
			}
			id := op.OperationID
			if id == "" {
				id = strings.ToLower(method) + nonName.ReplaceAllString(path, "_")
			}
			found[id] = true
			if len(im.wanted) > 0 && !im.wanted[id] {
				continue
			}
			converted, err := im.operation(id, method, path, item, op)
			if err == nil && names[converted.Name] {
				err = fmt.Errorf("its name %q is another operation's", converted.Name)
			}
			if err != nil {
				im.skipped = append(im.skipped, Skipped{id, err.Error()})
				continue
			}
			names[converted.Name] = true
			ops = append(ops, converted)
		}
	}
	return ops, found
}

var nonName = regexp.MustCompile(`[^A-Za-z0-9_.-]+`)
