package cli

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// A terminal for a test: the controlling side and the side a command reads.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	if err := unix.IoctlSetPointerInt(int(master.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(master.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tty.Close() })
	return master, tty
}

func echoes(t *testing.T, tty *os.File) bool {
	t.Helper()
	st, err := unix.IoctlGetTermios(int(tty.Fd()), unix.TCGETS)
	if err != nil {
		t.Fatal(err)
	}
	return st.Lflag&unix.ECHO != 0
}

// At a terminal the password is asked for without echo; Ctrl-C (the context
// ending) stops the asking at once and gives the terminal its echo back, rather
// than waiting, unseen, for two lines before failing.
func TestPasswordPromptStopsOnInterrupt(t *testing.T) {
	master, tty := openPTY(t)
	var stderr testkit.LockedBuffer
	ctx, cancel := context.WithCancel(t.Context())
	env := &environ{stdin: tty, stdout: &strings.Builder{}, stderr: &stderr, getenv: func(string) string { return "" }}
	done := make(chan error, 1)
	go func() {
		_, err := readPassword(ctx, env)
		done <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for echoes(t, tty) {
		if time.Now().After(deadline) {
			t.Fatal("the prompt never turned echo off")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("an interrupted prompt returned a password")
		}
	case <-time.After(5 * time.Second):
		master.Write([]byte("unblock\n"))
		t.Fatal("the prompt went on reading after the interrupt")
	}
	if !echoes(t, tty) {
		t.Fatal("the terminal was left without echo")
	}

	// Typed twice, the password is read (on a terminal of its own: the read the
	// interrupt left behind ends only with this process).
	master, tty = openPTY(t)
	env.stdin = tty
	ctx = t.Context()
	go func() {
		pw, err := readPassword(ctx, env)
		if err == nil && pw != "correct horse" {
			err = fmt.Errorf("read %q", pw)
		}
		done <- err
	}()
	master.Write([]byte("correct horse\n"))
	master.Write([]byte("correct horse\n"))
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the typed password was not read")
	}
	if !echoes(t, tty) {
		t.Fatal("the terminal was left without echo")
	}
}
