package modules

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"mime"
	"net/http"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
)

// operation converts one OpenAPI operation: its parameters (path, query,
// header) and the properties of its JSON object body become the tool's
// arguments; a JSON object answer becomes its outputSchema.
func (im *importer) operation(id, method, path string, item *openapi3.PathItem, op *openapi3.Operation) (Operation, error) {
	name := id
	if !opNamePattern.MatchString(name) {
		name = cut(nonName.ReplaceAllString(id, "_"), maxOperationNameLen)
	}
	props, required := map[string]any{}, []string{}
	// Path-level parameters first; the operation's own replace them.
	params := map[string]*openapi3.Parameter{}
	for _, list := range []openapi3.Parameters{item.Parameters, op.Parameters} {
		for _, p := range list {
			if p.Value != nil {
				params[p.Value.In+" "+p.Value.Name] = p.Value
			}
		}
	}
	for _, key := range slices.Sorted(maps.Keys(params)) {
		p := params[key]
		if p.In == "header" && strings.EqualFold(p.Name, im.authHeader) {
			continue // the credential's header: set from the environment
		}
		schema, err := im.paramSchema(p)
		if err != nil {
			return Operation{}, err
		}
		if _, dup := props[p.Name]; dup {
			return Operation{}, fmt.Errorf("parameter %q is named twice", p.Name)
		}
		props[p.Name] = schema
		if p.Required || p.In == "path" {
			required = append(required, p.Name)
		}
	}
	if err := im.body(op, props, &required); err != nil {
		return Operation{}, err
	}
	input := map[string]any{"type": "object", "properties": props, "additionalProperties": false}
	if len(required) > 0 {
		slices.Sort(required)
		input["required"] = required
	}
	in, err := json.Marshal(input)
	if err != nil {
		return Operation{}, err
	}
	readOnly, destructive, idempotent := method == http.MethodGet || method == http.MethodHead,
		method == http.MethodDelete || method == http.MethodPut, method != http.MethodPost && method != http.MethodPatch
	out := Operation{Method: method, Path: path, OperationTool: OperationTool{
		Name: name, Title: cut(op.Summary, maxTitle), Description: opDescription(op, method, path), InputSchema: in,
		OutputSchema: im.output(op),
		Annotations: &OperationAnnotations{ReadOnlyHint: &readOnly, DestructiveHint: &destructive,
			IdempotentHint: &idempotent, OpenWorldHint: ptr(true)},
	}}
	if _, err := compileOp(Manifest{Name: im.opts.Name}, out); err != nil {
		return Operation{}, err
	}
	return out, nil
}

func ptr[T any](v T) *T { return &v }

func opDescription(op *openapi3.Operation, method, path string) string {
	d := strings.TrimSpace(op.Summary)
	if desc := strings.TrimSpace(op.Description); desc != "" && desc != d {
		if d != "" {
			d += ". "
		}
		d += desc
	}
	if d == "" {
		d = method + " " + path
	}
	return cut(d, maxDesc)
}

// paramSchema is a parameter's schema, bound to where it goes.
func (im *importer) paramSchema(p *openapi3.Parameter) (map[string]any, error) {
	switch p.In {
	case "path", "query", "header":
	default:
		return nil, fmt.Errorf("parameter %q is in %s, which a rest capability cannot send", p.Name, p.In)
	}
	if p.Schema == nil {
		return nil, fmt.Errorf("parameter %q has no schema", p.Name)
	}
	if p.In == "query" && (p.Style != "" && p.Style != "form" || p.Explode != nil && !*p.Explode) {
		// A list is sent as ?tag=a&tag=b, the form style exploded: not a=b,c
		// (explode false), space or pipe delimited, nor a deepObject.
		return nil, fmt.Errorf("query parameter %q is sent in a style a rest capability cannot send (only form, exploded)", p.Name)
	}
	schema, err := im.schema(p.Schema)
	if err != nil {
		return nil, err
	}
	if _, ok := schema["description"]; !ok && p.Description != "" {
		schema["description"] = p.Description
	}
	schema["in"] = p.In
	return schema, nil
}

// body adds the properties of a JSON object body as body arguments.
func (im *importer) body(op *openapi3.Operation, props map[string]any, required *[]string) error {
	if op.RequestBody == nil || op.RequestBody.Value == nil {
		return nil
	}
	media := jsonMedia(op.RequestBody.Value.Content)
	if media == nil || media.Schema == nil {
		return errors.New("its request body is not JSON")
	}
	schema, err := im.schema(media.Schema)
	if err != nil {
		return err
	}
	bodyProps, ok := schema["properties"].(map[string]any)
	if schema["type"] != "object" || !ok {
		return errors.New("its request body is not a JSON object with properties")
	}
	for name, v := range bodyProps {
		p, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("body property %q has no schema", name)
		}
		if _, dup := props[name]; dup {
			return fmt.Errorf("body property %q has a parameter's name", name)
		}
		p["in"] = "body"
		props[name] = p
	}
	if op.RequestBody.Value.Required {
		if req, ok := schema["required"].([]any); ok {
			for _, r := range req {
				if s, ok := r.(string); ok {
					*required = append(*required, s)
				}
			}
		}
	}
	return nil
}

// output is the schema of a 200 or 201 JSON object answer, or nil.
func (im *importer) output(op *openapi3.Operation) json.RawMessage {
	if op.Responses == nil {
		return nil
	}
	for _, code := range []string{"200", "201"} {
		r := op.Responses.Value(code)
		if r == nil || r.Value == nil {
			continue
		}
		media := jsonMedia(r.Value.Content)
		if media == nil || media.Schema == nil {
			return nil
		}
		schema, err := im.schema(media.Schema)
		if err != nil || schema["type"] != "object" {
			return nil
		}
		b, _ := json.Marshal(schema)
		return b
	}
	return nil
}

func jsonMedia(c openapi3.Content) *openapi3.MediaType {
	for _, ct := range slices.Sorted(maps.Keys(c)) {
		mt, _, _ := mime.ParseMediaType(ct)
		if mt == "application/json" || strings.HasSuffix(mt, "+json") {
			return c[ct]
		}
	}
	return nil
}

// schema is ref as JSON Schema: $refs to components written out inline, and
// OpenAPI 3.0's own keywords made JSON Schema's or dropped.
func (im *importer) schema(ref *openapi3.SchemaRef) (map[string]any, error) {
	b, err := json.Marshal(ref)
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	out, ok := im.inline(v, 0).(map[string]any)
	if !ok {
		return nil, errors.New("a schema is not an object")
	}
	return out, nil
}

// dropped are OpenAPI keywords with no meaning (or another) in JSON Schema.
var dropped = []string{"xml", "example", "externalDocs", "discriminator", "nullable"}

func (im *importer) inline(v any, depth int) any {
	switch v := v.(type) {
	case []any: // allOf, anyOf, oneOf, prefixItems
		for i := range v {
			v[i] = im.inline(v[i], depth)
		}
		return v
	case map[string]any:
		if ref, ok := v["$ref"].(string); ok {
			name, found := strings.CutPrefix(ref, "#/components/schemas/")
			target, known := im.components[name]
			if !found || !known || depth >= maxSchemaDepth {
				return map[string]any{}
			}
			return im.inline(deepCopy(target), depth+1)
		}
		if v["nullable"] == true {
			if t, ok := v["type"].(string); ok {
				v["type"] = []any{t, "null"}
			}
		}
		for _, k := range dropped {
			delete(v, k)
		}
		exclusive(v, "exclusiveMaximum", "maximum")
		exclusive(v, "exclusiveMinimum", "minimum")
		for k, e := range v {
			switch {
			case slices.Contains(schemaMaps, k):
				if m, ok := e.(map[string]any); ok {
					for name, sub := range m {
						m[name] = im.inline(sub, depth)
					}
				}
			case slices.Contains(subSchemas, k):
				v[k] = im.inline(e, depth)
			}
		}
		return v
	}
	return v
}

// Where a schema holds schemas: maps of them by name, and one or a list of
// them. Any other member (enum, default, const) is a value, left as it is.
var (
	schemaMaps = []string{"properties", "patternProperties", "$defs", "definitions"}
	subSchemas = []string{"items", "additionalProperties", "not", "allOf", "anyOf", "oneOf", "prefixItems",
		"contains", "if", "then", "else", "propertyNames"}
)

// exclusive turns OpenAPI 3.0's boolean exclusiveMaximum into JSON Schema's
// number.
func exclusive(v map[string]any, key, bound string) {
	b, ok := v[key].(bool)
	if !ok {
		return
	}
	delete(v, key)
	if n, has := v[bound]; b && has {
		v[key] = n
		delete(v, bound)
	}
}

func deepCopy(v any) any {
	b, _ := json.Marshal(v)
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}

// risk is the catalog risk of the operations: destructive if any may
// destroy, read if none writes.
func risk(ops []Operation) string {
	r := "read"
	for _, op := range ops {
		switch {
		case *op.Annotations.DestructiveHint:
			return "destructive"
		case !*op.Annotations.ReadOnlyHint:
			r = "mutating"
		}
	}
	return r
}
