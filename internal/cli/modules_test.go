package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What modules list prints of a server's text cannot drive the terminal, whatever
// the server sent.
func TestPrintableEscapesWhatATerminalObeys(t *testing.T) {
	for in, want := range map[string]string{
		`exposed name "m_bad name" is not valid`: `exposed name "m_bad name" is not valid`,
		`already\u001bescaped`:                   `already\u001bescaped`,
		"raw\x1b[2Jclear":                        `raw\u001b[2Jclear`,
		"csi\u009bJ":                             `csi\u009bJ`,
		"rtl\u202eevil":                          `rtl\u202eevil`,
		"bad\xffbyte":                            "bad\ufffdbyte",
		"tag\U000e0041":                          `tag\U000e0041`,
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// A grant the running serve cannot honour (a misspelt module or tool) is kept,
// but said: otherwise a typo grants nothing without a word.
func TestEndpointGrantsAreCheckedAgainstTheServe(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		fmt.Fprint(w, `{"ready":true,"modules":[{"name":"everything","state":"up","tools":[{"name":"everything_echo"},{"name":"everything_add"}]}]}`)
	}))
	defer srv.Close()
	db := filepath.Join(t.TempDir(), "sb.db")
	env := map[string]string{"SWITCHBOARD_DB": db, "SWITCHBOARD_LISTEN": strings.TrimPrefix(srv.URL, "http://")}

	code, _, stderr := runCLI(t, env, "endpoint", "create", "--agent", "a", "--queues", "inbox",
		"--capabilities", "everything,evrything", "--tool-allow", "everything_echo,everything_ech", "--tool-deny", "everything_add")
	if code != 0 {
		t.Fatalf("create: exit %d, %s", code, stderr)
	}
	if !strings.Contains(stderr, `no module named "evrything" (it runs: everything)`) || !strings.Contains(stderr, `a tool named "everything_ech"`) {
		t.Fatalf("the misspelt grants were not noted:\n%s", stderr)
	}
	if strings.Count(stderr, "note:") != 2 {
		t.Fatalf("grants the serve has were noted too:\n%s", stderr)
	}
	code, _, stderr = runCLI(t, env, "endpoint", "update", "1", "--capabilities", "nosuch")
	if code != 0 || !strings.Contains(stderr, `no module named "nosuch"`) {
		t.Fatalf("update: exit %d, %s", code, stderr)
	}

	// With no serve to ask, nothing is said.
	env["SWITCHBOARD_LISTEN"] = "127.0.0.1:1"
	if code, _, stderr := runCLI(t, env, "endpoint", "create", "--agent", "b", "--queues", "inbox", "--capabilities", "nosuch"); code != 0 || stderr != "" {
		t.Fatalf("without a serve: exit %d, %q", code, stderr)
	}
}

// modules list says why a module is not serving: its last error and when it is
// tried again, and for a manifest that did not load, what is wrong with it.
func TestModulesListSaysWhyAModuleIsDown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"ready":false,"modules":[{"name":"up","state":"up","tools":[]},`+
			`{"name":"flaky","state":"backoff","last_error":"initialize: stdout closed\u001b[2J","next_attempt":"2026-05-01T11:00:05Z","tools":[]}]}`)
	}))
	defer srv.Close()
	code, out, _ := cli(t, "", "modules", "list", "--url", srv.URL)
	if code != 0 || !strings.Contains(out, "\nLast errors:\n  flaky: initialize: stdout closed\\u001b[2J (next start ") ||
		strings.Contains(out, "  up:") {
		t.Fatalf("modules list (exit %d):\n%s", code, out)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "broken.json"), []byte(`{"version": 1, "type": "module"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cli(t, "", "modules", "list", "--modules-dir", dir, "--db", filepath.Join(dir, "none.db"))
	if code != 1 || !strings.Contains(out, "Last errors:\n  broken.json: ") || !strings.Contains(stderr, "1 of the manifests would stop serve") {
		t.Fatalf("modules list of a directory with a broken manifest (exit %d):\n%s%s", code, out, stderr)
	}
}
