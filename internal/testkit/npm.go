package testkit

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ExternalRequired reports whether a test must fail, rather than skip, when
// Node.js, an npm package or another outside tool is missing: CI sets
// SWITCHBOARD_REQUIRE_EXTERNAL=1, so that its tests always run.
func ExternalRequired() bool { return os.Getenv("SWITCHBOARD_REQUIRE_EXTERNAL") == "1" }

// SkipOrFail skips t with the reason, or fails it when ExternalRequired.
func SkipOrFail(t testing.TB, format string, args ...any) {
	t.Helper()
	if ExternalRequired() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// NPMInstall copies files (a package.json, its package-lock.json and the scripts
// beside them) from dir into a temporary directory and installs the locked
// packages there with npm ci. It returns that directory and the node binary to run
// the scripts with; without node or npm, or when the install fails (no registry),
// the test skips (see SkipOrFail).
func NPMInstall(t testing.TB, dir string, files ...string) (workdir, node string) {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		SkipOrFail(t, "node not found: %v", err)
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		SkipOrFail(t, "npm not found: %v", err)
	}
	workdir = t.TempDir()
	for _, name := range files {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(workdir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// A deadline, not a timed assertion: a hung registry must not hang go test.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	install := exec.CommandContext(ctx, npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--prefer-offline",
		"--fetch-retries=1", "--fetch-retry-maxtimeout=10000", "--loglevel=error")
	install.Dir = workdir
	if out, err := install.CombinedOutput(); err != nil {
		SkipOrFail(t, "npm ci in %s failed (%v): %s", dir, err, npmReason(out))
	}
	return workdir, node
}

// npmReason picks npm's one-line cause ("npm error code ECONNREFUSED") out of its
// error output, for a skip message.
func npmReason(b []byte) string {
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "npm error code ") {
			return strings.TrimSpace(line)
		}
	}
	if line, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n"); line != "" {
		return line
	}
	return "no output"
}

// NPMSigner installs dir (ingest/npmsign: its lockfile and sign.mjs) into a
// temporary copy and returns a function that runs sign.mjs on a batch of requests.
func NPMSigner(t testing.TB, dir string) func(reqs []NPMSignRequest) []map[string]string {
	t.Helper()
	dir, node := NPMInstall(t, dir, "package.json", "package-lock.json", "sign.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return func(reqs []NPMSignRequest) []map[string]string {
		t.Helper()
		in, err := json.Marshal(reqs)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, node, "sign.mjs")
		cmd.Dir = dir
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sign.mjs: %v: %s", err, stderr.String())
		}
		var headers []map[string]string
		if err := json.Unmarshal(out, &headers); err != nil {
			t.Fatalf("sign.mjs output %q: %v", out, err)
		}
		if len(headers) != len(reqs) {
			t.Fatalf("sign.mjs answered %d of %d requests", len(headers), len(reqs))
		}
		return headers
	}
}

// NPMSignRequest is sign.mjs's stdin contract (see the top of that file).
type NPMSignRequest struct {
	Scheme    string `json:"scheme"`
	Secret    string `json:"secret"`
	Body      string `json:"body"`
	Timestamp int64  `json:"timestamp,omitempty"`
	ID        string `json:"id,omitempty"`
	Event     string `json:"event,omitempty"`
}
