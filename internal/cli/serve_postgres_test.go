package cli

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
)

// serve given a PostgreSQL server that is not there exits non-zero with one line
// naming the host and port it tried, and not the password (under systemd,
// Restart= starts it again).
func TestServeExitsWhenPostgreSQLIsUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var out, errb bytes.Buffer
	env := &environ{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	code := run(context.Background(), env, []string{"serve", "--listen", "127.0.0.1:0",
		"--db", "postgres://switchboard:hunter2-secret@" + addr + "/switchboard"})
	msg := errb.String()
	if code == 0 {
		t.Fatalf("serve exited 0; stderr %q", msg)
	}
	if strings.Count(strings.TrimSpace(msg), "\n") != 0 || !strings.Contains(msg, "PostgreSQL at "+addr) ||
		!strings.Contains(msg, "refused") {
		t.Fatalf("serve said %q, want one line naming %s and why", msg, addr)
	}
	if strings.Contains(msg+out.String(), "hunter2") {
		t.Fatalf("serve printed the password: %q %q", msg, out.String())
	}
}
