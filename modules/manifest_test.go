package modules

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeExecutable writes a tiny script with the given mode.
func writeExecutable(t *testing.T, dir, name string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 0\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func baseManifest(command string) map[string]any {
	return map[string]any{
		"version":               1,
		"type":                  "module",
		"name":                  "example",
		"title":                 "Example API",
		"description":           "Use reviewed operations from the Example API.",
		"tags":                  []string{"example"},
		"risk":                  "mutating",
		"command":               command,
		"arguments":             []string{"--flag", "$NOT_EXPANDED"},
		"environment":           []string{"EXAMPLE_API_URL", "EXAMPLE_API_TOKEN"},
		"enforce_egress_policy": true,
		"include_tools":         []string{"example_status", "example_update"},
	}
}

func writeManifest(t *testing.T, dir, file string, m map[string]any) {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func testEnv(name string) (string, bool) {
	env := map[string]string{"EXAMPLE_API_URL": "https://example.test", "EXAMPLE_API_TOKEN": "tok", "EXAMPLE_API_KEY": "api-key-canary-7f3", "EMPTY": "", "SWITCHBOARD_MODULE_NAME": "x"}
	v, ok := env[name]
	return v, ok
}

func TestLoadDirAcceptsTheSeedExample(t *testing.T) {
	bin := t.TempDir()
	cmd := writeExecutable(t, bin, "switchboard-module-example", 0o755)
	dir := t.TempDir()
	writeManifest(t, dir, "example.json", baseManifest(cmd))
	if err := os.WriteFile(filepath.Join(dir, "README.txt"), []byte("not a manifest"), 0o600); err != nil {
		t.Fatal(err)
	}
	ms, err := LoadDir(dir, LoadOptions{LookupEnv: testEnv, EgressPolicy: `{"allow":["example.test"]}`})
	if err != nil {
		t.Fatal(err)
	}
	want := Manifest{
		File: "example.json", Version: 1, Type: "module", Name: "example", Title: "Example API",
		Description: "Use reviewed operations from the Example API.", Tags: []string{"example"},
		Risk: "mutating", Command: cmd, Arguments: []string{"--flag", "$NOT_EXPANDED"},
		Environment:         []string{"EXAMPLE_API_URL", "EXAMPLE_API_TOKEN"},
		EnforceEgressPolicy: true, IncludeTools: []string{"example_status", "example_update"},
	}
	if len(ms) != 1 || !reflect.DeepEqual(ms[0], want) {
		t.Fatalf("LoadDir = %#v, want [%#v]", ms, want)
	}
	env := ms[0].childEnv(testEnv, "policy")
	wantEnv := []string{"LANG=C.UTF-8", "SWITCHBOARD_MODULE_NAME=example",
		"EXAMPLE_API_URL=https://example.test", "EXAMPLE_API_TOKEN=tok", "SWITCHBOARD_MODULE_EGRESS_POLICY=policy"}
	if !reflect.DeepEqual(env, wantEnv) {
		t.Fatalf("childEnv = %q, want %q", env, wantEnv)
	}
}

func TestLoadDirRefusesBadManifests(t *testing.T) {
	bin := t.TempDir()
	good := writeExecutable(t, bin, "module", 0o755)
	worldWritable := writeExecutable(t, bin, "world-writable", 0o757)
	groupWritable := writeExecutable(t, bin, "group-writable", 0o775)
	notExec := writeExecutable(t, bin, "not-exec", 0o644)
	link := filepath.Join(bin, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		edit   func(m map[string]any)
		egress string
		field  string
		msg    string
	}{
		{"relative path", func(m map[string]any) { m["command"] = "bin/module" }, "", "command", "must be an absolute path"},
		{"unclean path", func(m map[string]any) { m["command"] = bin + "/./module" }, "", "command", "clean path"},
		{"symlink", func(m map[string]any) { m["command"] = link }, "", "command", "symlink"},
		{"world-writable binary", func(m map[string]any) { m["command"] = worldWritable }, "", "command", "world-writable"},
		{"group-writable binary", func(m map[string]any) { m["command"] = groupWritable }, "", "command", "group- or world-writable"},
		{"not executable", func(m map[string]any) { m["command"] = notExec }, "", "command", "must be executable"},
		{"missing binary", func(m map[string]any) { m["command"] = bin + "/absent" }, "", "command", "cannot stat"},
		{"directory", func(m map[string]any) { m["command"] = bin }, "", "command", "regular file"},
		{"missing env value", func(m map[string]any) { m["environment"] = []string{"EXAMPLE_API_URL", "NOT_SET"} }, "", "environment", `"NOT_SET" is not set or empty`},
		{"empty env value", func(m map[string]any) { m["environment"] = []string{"EMPTY"} }, "", "environment", `"EMPTY" is not set or empty`},
		{"reserved env name", func(m map[string]any) { m["environment"] = []string{"SWITCHBOARD_MODULE_NAME"} }, "", "environment", "reserved"},
		{"bad env name", func(m map[string]any) { m["environment"] = []string{"A=B"} }, "", "environment", "not a valid variable name"},
		{"bad name", func(m map[string]any) { m["name"] = "Example-API" }, "", "name", "must match"},
		{"name too long", func(m map[string]any) { m["name"] = "a" + strings.Repeat("b", 64) }, "", "name", "must match"},
		{"duplicate include_tools", func(m map[string]any) { m["include_tools"] = []string{"a", "b", "a"} }, "", "include_tools", `lists "a" more than once`},
		{"empty include_tools", func(m map[string]any) { m["include_tools"] = []string{} }, "", "include_tools", "non-empty"},
		{"null include_tools", func(m map[string]any) { m["include_tools"] = nil }, "", "include_tools", "non-empty"},
		{"empty include_tools entry", func(m map[string]any) { m["include_tools"] = []string{"a", ""} }, "", "include_tools", "empty tool name"},
		{"include_tools entry the gateway would refuse", func(m map[string]any) { m["include_tools"] = []string{"has space"} }, "", "include_tools",
			`"has space" would be exposed as "example_has space", which is not a valid MCP tool name`},
		{"include_tools entries sharing an exposed name", func(m map[string]any) { m["include_tools"] = []string{"status", "example_status"} }, "", "include_tools",
			`"status" and "example_status" would both be exposed as "example_status"`},
		{"unknown field", func(m map[string]any) { m["shell"] = "/bin/sh" }, "", "shell", "unknown field"},
		{"unknown type", func(m map[string]any) { m["type"] = "ftp" }, "", "type", `unknown capability type "ftp"`},
		{"a module field on a rest capability", func(m map[string]any) { m["type"] = "rest" }, "", "arguments", `is not a field of a "rest" capability`},
		{"missing type", func(m map[string]any) { delete(m, "type") }, "", "type", "is required"},
		{"version 2", func(m map[string]any) { m["version"] = 2 }, "", "version", "unsupported version 2"},
		{"missing version", func(m map[string]any) { delete(m, "version") }, "", "version", "is required"},
		{"wrong JSON type", func(m map[string]any) { m["arguments"] = "--flag" }, "", "arguments", "must be []string"},
		{"egress not enforced", func(m map[string]any) { m["enforce_egress_policy"] = false }, `{"allow":[]}`, "enforce_egress_policy", "must be true"},
		{"missing title", func(m map[string]any) { delete(m, "title") }, "", "title", "must be 1 to"},
		{"missing description", func(m map[string]any) { m["description"] = " " }, "", "description", "must be 1 to"},
		{"bad risk", func(m map[string]any) { m["risk"] = "spicy" }, "", "risk", "must be one of"},
		{"bad tag", func(m map[string]any) { m["tags"] = []string{"Bad Tag"} }, "", "tags", "must match"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			m := baseManifest(good)
			tc.edit(m)
			writeManifest(t, dir, "example.json", m)
			_, err := LoadDir(dir, LoadOptions{LookupEnv: testEnv, EgressPolicy: tc.egress})
			if err == nil {
				t.Fatal("LoadDir accepted the manifest")
			}
			prefix := `modules: example.json: field "` + tc.field + `": `
			if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q\nwant prefix %q and %q", err, prefix, tc.msg)
			}
		})
	}
}

func TestLoadDirRefusesInvalidJSON(t *testing.T) {
	for name, body := range map[string]string{
		"syntax":        `{"version": 1,`,
		"trailing data": `{"version":1} {}`,
		"not an object": `[1]`,
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "broken.json"), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err := LoadDir(dir, LoadOptions{LookupEnv: testEnv})
			if err == nil || !strings.HasPrefix(err.Error(), "modules: broken.json: ") {
				t.Fatalf("err = %v, want one naming broken.json", err)
			}
		})
	}
}

func TestLoadDirRefusesConflictingNames(t *testing.T) {
	cmd := writeExecutable(t, t.TempDir(), "module", 0o755)
	for _, tc := range []struct{ first, second, msg string }{
		{"example", "example", `module "example" is already defined in a.json`},
		{"git", "git_hub", "ambiguous prefixed names"},
		{"git_hub", "git", "ambiguous prefixed names"},
	} {
		dir := t.TempDir()
		a, b := baseManifest(cmd), baseManifest(cmd)
		a["name"], b["name"] = tc.first, tc.second
		writeManifest(t, dir, "a.json", a)
		writeManifest(t, dir, "b.json", b)
		_, err := LoadDir(dir, LoadOptions{LookupEnv: testEnv})
		if err == nil || !strings.HasPrefix(err.Error(), `modules: b.json: field "name": `) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s + %s: err = %v, want b.json name error with %q", tc.first, tc.second, err, tc.msg)
		}
	}
}

func TestLoadDirMissingDirFails(t *testing.T) {
	if _, err := LoadDir(filepath.Join(t.TempDir(), "absent"), LoadOptions{}); err == nil {
		t.Fatal("LoadDir of a missing directory succeeded")
	}
}
