package store

import (
	"context"
	"io"
	"log/slog"
	"net"
	"syscall"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"golang.org/x/sys/unix"
)

// deadPeerOptions reads a TCP connection's TCP_USER_TIMEOUT (ms) and SO_KEEPALIVE.
func deadPeerOptions(t *testing.T, c net.Conn) (userTimeout, keepAlive int) {
	t.Helper()
	tcp, ok := c.(syscall.Conn)
	if !ok {
		t.Fatalf("%T is no socket", c)
	}
	raw, err := tcp.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var e1, e2 error
	raw.Control(func(fd uintptr) {
		userTimeout, e1 = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		keepAlive, e2 = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
	})
	if e1 != nil || e2 != nil {
		t.Fatal(e1, e2)
	}
	return userTimeout, keepAlive
}

// Every connection to PostgreSQL gives up a peer that stops acknowledging
// after pgDeadPeer, and probes an idle one: a reader's, here, dialled from the
// store's configuration as the writer's, the flusher's and the watch's are.
func TestPostgresConnectionsGiveUpADeadPeer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := pgDialFunc(defaultConnectTimeout)(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if ut, ka := deadPeerOptions(t, c); ut != int(pgDeadPeer.Milliseconds()) || ka != 1 {
		t.Fatalf("dialled: TCP_USER_TIMEOUT %d ms, SO_KEEPALIVE %d", ut, ka)
	}

	s, err := Open(context.Background(), testkit.PostgresURL(t), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	conn, err := s.rdb.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.Raw(func(dc any) error {
		if ut, ka := deadPeerOptions(t, dc.(*stdlib.Conn).Conn().PgConn().Conn()); ut != int(pgDeadPeer.Milliseconds()) || ka != 1 {
			t.Errorf("a reader's connection: TCP_USER_TIMEOUT %d ms, SO_KEEPALIVE %d", ut, ka)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
