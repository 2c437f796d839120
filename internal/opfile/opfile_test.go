package opfile

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// readSoon runs Read in a goroutine so that a read that blocks (a FIFO opened
// without O_NONBLOCK) fails the test instead of hanging it.
func readSoon(t *testing.T, path string, limit int64) ([]byte, error) {
	t.Helper()
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := Read(path, limit)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-time.After(10 * time.Second):
		t.Fatalf("Read(%s) blocked", path)
		return nil, nil
	}
}

func TestReadRefusesWhatIsNotASmallRegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte(strings.Repeat("x", 101)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, path, want string }{
		{"endless device", "/dev/zero", "is not a regular file (a character device)"},
		{"named pipe", fifo, "is not a regular file (a named pipe)"},
		{"directory", dir, "is not a regular file (a directory)"},
		{"too big", big, "is larger than 100 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readSoon(t, tc.path, 100)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Read(%s) = %v, want an error saying %q", tc.path, err, tc.want)
			}
		})
	}
}

func TestReadReturnsARegularFileUpToTheCap(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(strings.Repeat("x", 100)), 0o600); err != nil {
		t.Fatal(err)
	}
	// A symlink to a regular file is how operators often place keys: it is read.
	link := p + ".link"
	if err := os.Symlink(p, link); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{p, link} {
		b, err := readSoon(t, path, 100)
		if err != nil || len(b) != 100 {
			t.Fatalf("Read(%s) = %d bytes, %v; want 100 bytes", path, len(b), err)
		}
	}
	if _, err := Read(filepath.Join(t.TempDir(), "absent"), 100); !os.IsNotExist(err) {
		t.Fatalf("Read(absent) = %v, want not-exist", err)
	}
}
