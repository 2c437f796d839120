package cli

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cliReturns is cli for a command that could block forever on a bad file: a
// command still running after the deadline fails the test instead of hanging it.
func cliReturns(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	type result struct {
		code     int
		out, err string
	}
	done := make(chan result, 1)
	go func() {
		c, o, e := cli(t, "", args...)
		done <- result{c, o, e}
	}()
	select {
	case r := <-done:
		return r.code, r.out, r.err
	case <-time.After(20 * time.Second):
		t.Fatalf("%s blocked on a file it should have refused", strings.Join(args, " "))
		return 0, "", ""
	}
}

// A key file that is a device, a pipe, a directory or far too long is refused
// at once, in words: serve neither reads /dev/zero until memory runs out nor
// waits on a FIFO past SIGTERM.
func TestServeRefusesAKeyFileThatIsNotASmallRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "key.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.key")
	if err := os.WriteFile(big, []byte(strings.Repeat("a", maxKeyFile+1)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, file, want string }{
		{"device", "/dev/zero", "is not a regular file (a character device)"},
		{"fifo", fifo, "is not a regular file (a named pipe)"},
		{"directory", dir, "is not a regular file (a directory)"},
		{"too big", big, "is larger than 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := cliReturns(t, "serve", "--db", filepath.Join(dir, "sb.db"), "--listen", "127.0.0.1:0",
				"--secret-key-file", tc.file)
			if code != 1 || !strings.Contains(stderr, "--secret-key-file") || !strings.Contains(stderr, tc.want) {
				t.Fatalf("serve --secret-key-file %s: exit %d, %q; want exit 1 saying %q", tc.file, code, stderr, tc.want)
			}
		})
	}
}

// A FIFO named *.json in the modules directory is reported as a broken manifest,
// not waited on.
func TestModulesListRefusesAFIFOManifest(t *testing.T) {
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "pipe.json"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, stderr := cliReturns(t, "modules", "list", "--modules-dir", dir, "--db", filepath.Join(dir, "none.db"))
	if code != 1 || !strings.Contains(out, "pipe.json: modules: pipe.json: ") || !strings.Contains(out, "is not a regular file (a named pipe)") {
		t.Fatalf("modules list of a directory holding a FIFO (exit %d):\n%s%s", code, out, stderr)
	}
}

// todo add --payload-file refuses a FIFO rather than waiting for a writer.
func TestTodoAddRefusesAFIFOPayloadFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "payload")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cliReturns(t, "todo", "add", "--db", filepath.Join(dir, "sb.db"), "--queue", "q", "--payload-file", fifo)
	if code != 1 || !strings.Contains(stderr, "read payload: read "+fifo+": is not a regular file (a named pipe)") {
		t.Fatalf("todo add --payload-file FIFO: exit %d, %q", code, stderr)
	}
}
