package store

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Both ways of making the call sync a file, and both report a failure.
func TestFdatasyncRawAndUsual(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString("x"); err != nil {
		t.Fatal(err)
	}
	for _, raw := range []bool{true, false} {
		if err := fdatasyncFd(f.Fd(), raw); err != nil {
			t.Errorf("raw %v: sync an open file: %v", raw, err)
		}
		if err := fdatasyncFd(^uintptr(0), raw); !errors.Is(err, syscall.EBADF) {
			t.Errorf("raw %v: sync a descriptor that is not open: %v, want EBADF", raw, err)
		}
	}
}
