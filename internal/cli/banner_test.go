package cli

import (
	"bufio"
	"context"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// `go run . serve` on a new database says what to type next as the user can
// type it: `go run . operator create …`, not a switchboard binary they do not
// have; and its first line names the version as a version, not as a mode.
func TestServeSaysNextStepsAsInvoked(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	env := &environ{stdin: strings.NewReader(""), stderr: io.Discard, getenv: func(string) string { return "" },
		arg0: filepath.Join(t.TempDir(), "go-build3141592", "b001", "exe", "switchboard")}
	lines, stop := serveFirstLines(env, 3, "serve", "--db", db, "--listen", "127.0.0.1:0") // banner and two hints
	if code := stop(); code != 0 {
		t.Fatalf("serve exited %d: %q", code, lines)
	}
	if len(lines) < 3 {
		t.Fatalf("serve printed %q", lines)
	}
	banner := lines[0]
	if !strings.HasPrefix(banner, "switchboard listening on http://127.0.0.1:") || !strings.Contains(banner, "version dev") ||
		strings.Contains(banner, "switchboard dev listening") {
		t.Errorf("banner %q", banner)
	}
	if !strings.Contains(lines[1], ": go run . operator create --username NAME --db "+db) ||
		!strings.Contains(lines[2], ": go run . endpoint create --agent NAME --queues QUEUE --db "+db) {
		t.Errorf("next steps %q", lines[1:])
	}
}

func TestInvokedAs(t *testing.T) {
	onPath, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on the PATH to stand in for an installed binary")
	}
	for arg0, want := range map[string]string{
		"":                                       "switchboard",
		"switchboard":                            "switchboard",
		"./switchboard":                          "./switchboard",
		"/tmp/go-build2718/b001/exe/switchboard": "go run .",
		onPath:                                   "sh",
		"/opt/elsewhere/switchboard":             "/opt/elsewhere/switchboard",
	} {
		if got := invokedAs(arg0); got != want {
			t.Errorf("invokedAs(%q) = %q, want %q", arg0, got, want)
		}
	}
}

// serveFirstLines runs serve (args) in-process on env, and returns the first n
// lines it prints (fewer if it ends first) and a stop that ends it and returns its
// exit code.
func serveFirstLines(env *environ, n int, args ...string) (lines []string, stop func() int) {
	r, w := io.Pipe()
	env.stdout = w
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, env, args)
		w.Close()
	}()
	sc := bufio.NewScanner(r)
	for len(lines) < n && sc.Scan() {
		lines = append(lines, sc.Text())
	}
	go io.Copy(io.Discard, r)
	return lines, func() int {
		cancel()
		return <-done
	}
}
