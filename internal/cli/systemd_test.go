package cli

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMain lets this test binary stand in for the real `switchboard` when it is
// started as `<binary> serve …` (socket activation needs a process of its own, and
// `bench` starts serve from os.Executable, which is this binary under go test). go
// test itself never passes "serve" as the first argument.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		os.Exit(Main("dev", ""))
	}
	os.Exit(m.Run())
}

func TestServeNotifiesSystemdInOrder(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", "200000") // 200 ms: pings every 100 ms
	t.Setenv("WATCHDOG_PID", "")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errb bytes.Buffer
	env := &environ{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, env, []string{"serve", "--listen", "127.0.0.1:0", "--db", filepath.Join(dir, "sb.db")})
	}()

	var seen []string
	first := map[string]int{}
	record := func(msg string) {
		for _, line := range strings.Split(msg, "\n") {
			key, _, _ := strings.Cut(line, "=")
			if _, ok := first[key]; !ok && key != "" {
				first[key] = len(seen)
				seen = append(seen, line)
			}
		}
	}
	buf := make([]byte, 4096)
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	for first["WATCHDOG"] == 0 {
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("waiting for READY, STATUS, WATCHDOG: %v (got %q; stderr %s)", err, seen, errb.String())
		}
		record(string(buf[:n]))
	}
	cancel()
	for {
		if _, ok := first["STOPPING"]; ok {
			break
		}
		n, err := conn.Read(buf)
		if err != nil {
			t.Fatalf("waiting for STOPPING: %v (got %q)", err, seen)
		}
		record(string(buf[:n]))
	}
	if code := <-done; code != 0 {
		t.Fatalf("serve exited %d: %s", code, errb.String())
	}
	want := []string{"READY", "STATUS", "WATCHDOG", "STOPPING"}
	for i, k := range want {
		if first[k] != i {
			t.Fatalf("notifications in order %q, want %v first", seen, want)
		}
	}
	if !strings.Contains(seen[1], "pending") {
		t.Errorf("STATUS line %q does not describe the queue", seen[1])
	}
}

func TestSocketActivation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a child process")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := ln.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	// LISTEN_PID must be the child's own pid: sh learns it as $$ and execs in place.
	// --listen names an address that cannot be bound, so serving at all proves the
	// passed socket was used.
	cmd := exec.Command("/bin/sh", "-c", `LISTEN_PID=$$ exec "$0" "$@"`, os.Args[0],
		"serve", "--listen", "256.0.0.1:0", "--db", filepath.Join(t.TempDir(), "sb.db"))
	cmd.Env = append(os.Environ(), "LISTEN_FDS=1", "LISTEN_FDNAMES=http")
	cmd.ExtraFiles = []*os.File{f}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ln.Close() // the child holds the socket now
	defer cmd.Process.Kill()

	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer on the passed socket: %v\n%s", err, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("serve did not exit cleanly on SIGTERM: %v\n%s", err, stderr.String())
	}
}

func TestLogsLeaveTimestampsToTheJournal(t *testing.T) {
	for _, c := range []struct {
		journal bool
		stamped bool
	}{{false, true}, {true, false}} {
		var b bytes.Buffer
		newLogger(&b, "text", c.journal).Info("hello", "k", "v")
		if got := strings.Contains(b.String(), "time="); got != c.stamped {
			t.Errorf("under journal=%v: %q", c.journal, b.String())
		}
		if !strings.Contains(b.String(), "msg=hello k=v") {
			t.Errorf("under journal=%v the message is lost: %q", c.journal, b.String())
		}
	}
}
