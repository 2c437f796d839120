package testkit

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
)

var testModule struct {
	once sync.Once
	path string
	err  error
}

// TestModule returns the path of the stdio test module (modules/testdata/testmodule),
// built once: compiling it per test would dominate a suite on a 2-core machine. The
// binary is kept under os.TempDir in a directory named by the hash of its sources, so
// the packages whose tests run at once share one build, and a changed source gets a
// new one.
func TestModule(t testing.TB) string {
	t.Helper()
	bin, err := BuildTestModule()
	if err != nil {
		t.Fatalf("build test module: %v", err)
	}
	return bin
}

// BuildTestModule is TestModule for a TestMain, which has no testing.TB.
func BuildTestModule() (string, error) {
	testModule.once.Do(func() { testModule.path, testModule.err = buildTestModule() })
	return testModule.path, testModule.err
}

func buildTestModule() (string, error) {
	_, self, _, _ := runtime.Caller(0)
	root := filepath.Join(filepath.Dir(self), "..", "..")
	src := filepath.Join(root, "modules", "testdata", "testmodule")
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version())
	files, _ := filepath.Glob(filepath.Join(src, "*.go"))
	for _, f := range append(files, filepath.Join(root, "go.sum")) {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", filepath.Base(f), len(b))
		h.Write(b)
	}
	dir := filepath.Join(os.TempDir(), "switchboard-testmodule-"+hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(dir, "testmodule")
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	// Built beside its final name and renamed into place, so a test process running
	// at the same time sees either no binary or a whole one.
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	build := exec.Command("go", "build", "-o", filepath.Join(tmp, "testmodule"), ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("%w\n%s", err, out)
	}
	// go build honours the umask; the manifest contract refuses group-writable
	// executables.
	if err := os.Chmod(filepath.Join(tmp, "testmodule"), 0o755); err != nil {
		return "", err
	}
	// The directory too: the manifest contract checks the executable's parents.
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", err
	}
	return bin, os.Rename(filepath.Join(tmp, "testmodule"), bin)
}
