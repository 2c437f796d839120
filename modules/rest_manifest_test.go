package modules

import (
	"strings"
	"testing"
)

// restManifest is a rest capability's manifest for the pets API of restAPI.
func restManifest(baseURL string) map[string]any {
	yes, no := true, false
	op := func(name, method, path string, props map[string]any, required []string, readOnly bool) map[string]any {
		schema := map[string]any{"type": "object", "properties": props}
		if required != nil {
			schema["required"] = required
		}
		return map[string]any{"name": name, "description": "The " + name + " operation.", "method": method, "path": path,
			"inputSchema": schema, "annotations": map[string]any{"readOnlyHint": readOnly, "destructiveHint": no}}
	}
	getPet := op("get_pet", "GET", "/pets/{id}", map[string]any{
		"id":      map[string]any{"type": "string", "in": "path"},
		"verbose": map[string]any{"type": "boolean", "in": "query"},
		"tag":     map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "in": "query"},
		"X-Trace": map[string]any{"type": "string", "in": "header"},
	}, []string{"id"}, true)
	getPet["outputSchema"] = map[string]any{"type": "object"}
	return map[string]any{
		"version": 1, "type": "rest", "name": "pets", "title": "Pets API", "description": "The pets of the tests.",
		"risk": "mutating", "base_url": baseURL, "timeout": "1s", "max_response_bytes": 4096,
		"auth": map[string]any{"type": "bearer", "env": "EXAMPLE_API_TOKEN"},
		"operations": []any{
			getPet,
			op("add_pet", "POST", "/pets", map[string]any{
				"name": map[string]any{"type": "string", "in": "body"},
				"age":  map[string]any{"type": "integer", "minimum": 0, "in": "body"},
			}, []string{"name"}, false),
			op("fail", "GET", "/fail", map[string]any{}, nil, yes),
			op("slow", "GET", "/slow", map[string]any{}, nil, yes),
			op("endless", "GET", "/endless", map[string]any{}, nil, yes),
			op("redirect", "GET", "/redirect", map[string]any{"to": map[string]any{"type": "string", "in": "query"}}, []string{"to"}, yes),
		},
	}
}

// operation returns the i-th operation of a restManifest, to edit.
func operation(m map[string]any, i int) map[string]any {
	return m["operations"].([]any)[i].(map[string]any)
}

func props(m map[string]any, i int) map[string]any {
	return operation(m, i)["inputSchema"].(map[string]any)["properties"].(map[string]any)
}

func TestRESTManifestAccepted(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, "pets.json", restManifest("https://api.example.test/v1"))
	ms, err := LoadDir(dir, LoadOptions{LookupEnv: testEnv})
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || ms[0].Type != TypeREST || len(ms[0].Operations) != 6 || ms[0].Auth.Env != "EXAMPLE_API_TOKEN" {
		t.Fatalf("LoadDir = %+v", ms)
	}
}

func TestRESTManifestRefusals(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(m map[string]any)
		field string
		msg   string
	}{
		{"unknown field", func(m map[string]any) { m["verb"] = "GET" }, "verb", "unknown field"},
		{"unknown field in an operation", func(m map[string]any) { operation(m, 0)["query"] = "x" }, "query", "unknown field"},
		{"a module's field", func(m map[string]any) { m["command"] = "/bin/true" }, "command", `is not a field of a "rest" capability`},
		{"missing env variable", func(m map[string]any) { m["auth"] = map[string]any{"type": "bearer", "env": "NOT_SET"} }, "auth.env", `"NOT_SET" is not set or empty`},
		{"Switchboard's own variable", func(m map[string]any) {
			m["auth"] = map[string]any{"type": "bearer", "env": "SWITCHBOARD_SECRET_ENCRYPTION_KEY"}
		}, "auth.env", "Switchboard's own setting"},
		{"a credential given literally", func(m map[string]any) { m["auth"] = map[string]any{"type": "bearer", "token": "abc"} }, "token", "unknown field"},
		{"a credential in the URL", func(m map[string]any) { m["base_url"] = "https://user:pw@api.example.test/" }, "base_url", "must not hold a user"},
		{"not http", func(m map[string]any) { m["base_url"] = "ftp://api.example.test/" }, "base_url", "http or https"},
		{"basic auth without a password", func(m map[string]any) {
			m["auth"] = map[string]any{"type": "basic", "username_env": "EXAMPLE_API_TOKEN"}
		}, "auth.password_env", "not a valid variable name"},
		{"bad auth type", func(m map[string]any) { m["auth"] = map[string]any{"type": "cookie", "env": "EXAMPLE_API_TOKEN"} }, "auth.type", "bearer, header or basic"},
		{"no operations", func(m map[string]any) { m["operations"] = []any{} }, "operations", "must list 1 to"},
		{"path naming no property", func(m map[string]any) { operation(m, 0)["path"] = "/pets/{petId}" }, "operations[0].path", `{petId} names no inputSchema property`},
		{"path property not in the path", func(m map[string]any) { operation(m, 0)["path"] = "/pets" }, "operations[0].inputSchema.properties.id.in", "is not in the path"},
		{"path property not required", func(m map[string]any) {
			operation(m, 0)["inputSchema"].(map[string]any)["required"] = []string{}
		}, "operations[0].inputSchema.required", `must list the path parameter "id"`},
		{"property bound nowhere", func(m map[string]any) { delete(props(m, 0)["verbose"].(map[string]any), "in") }, "operations[0].inputSchema.properties.verbose.in", "is required"},
		{"a body on GET", func(m map[string]any) { props(m, 0)["verbose"].(map[string]any)["in"] = "body" }, "operations[0].inputSchema.properties.verbose.in", "a GET request has no body"},
		{"an argument setting the credential", func(m map[string]any) {
			props(m, 0)["Authorization"] = map[string]any{"type": "string", "in": "header"}
		}, "operations[0].inputSchema.properties.Authorization.in", "cannot be a header"},
		{"an object in the query", func(m map[string]any) {
			props(m, 0)["filter"] = map[string]any{"type": "object", "in": "query"}
		}, "operations[0].inputSchema.properties.filter.type", "a query argument cannot be an object"},
		{"a list in the path", func(m map[string]any) {
			props(m, 0)["id"] = map[string]any{"type": "array", "items": map[string]any{"type": "integer"}, "in": "path"}
		}, "operations[0].inputSchema.properties.id.type", "a path argument cannot be an array"},
		{"a list in a header", func(m map[string]any) { props(m, 0)["X-Trace"].(map[string]any)["type"] = []string{"array", "null"} },
			"operations[0].inputSchema.properties.X-Trace.type", "a header argument cannot be an array"},
		{"a list of objects in the query", func(m map[string]any) {
			props(m, 0)["tag"].(map[string]any)["items"] = map[string]any{"type": "object"}
		}, "operations[0].inputSchema.properties.tag.items.type", "a query argument's items cannot be objects"},
		{"no annotations", func(m map[string]any) { delete(operation(m, 1), "annotations") }, "operations[1].annotations", "is required"},
		{"no readOnlyHint", func(m map[string]any) {
			operation(m, 1)["annotations"] = map[string]any{"destructiveHint": true}
		}, "operations[1].annotations.readOnlyHint", "is required"},
		{"no destructiveHint", func(m map[string]any) {
			operation(m, 1)["annotations"] = map[string]any{"readOnlyHint": false}
		}, "operations[1].annotations.destructiveHint", "is required"},
		{"bad method", func(m map[string]any) { operation(m, 1)["method"] = "TRACE" }, "operations[1].method", "must be GET"},
		{"schema not an object's", func(m map[string]any) { operation(m, 2)["inputSchema"] = map[string]any{"type": "array"} }, "operations[2].inputSchema", `"type": "object"`},
		{"a schema reading a file", func(m map[string]any) {
			operation(m, 2)["inputSchema"] = map[string]any{"type": "object", "$ref": "file:///etc/passwd"}
		}, "operations[2].inputSchema", "may refer only to itself"},
		{"two operations of one name", func(m map[string]any) { operation(m, 2)["name"] = "get_pet" }, "operations[2].name", "is used by another"},
		{"bad timeout", func(m map[string]any) { m["timeout"] = "1h" }, "timeout", "from 1s to"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m := restManifest("https://api.example.test/v1")
			tc.edit(m)
			writeManifest(t, dir, "pets.json", m)
			_, err := LoadDir(dir, LoadOptions{LookupEnv: testEnv})
			if err == nil {
				t.Fatal("LoadDir accepted the manifest")
			}
			prefix := `modules: pets.json: field "` + tc.field + `": `
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q\nwant prefix %q and %q", err, prefix, tc.msg)
			}
		})
	}
}
