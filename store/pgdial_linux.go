package store

import (
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// setDeadPeer sets TCP_USER_TIMEOUT to pgDeadPeer on a TCP socket.
func setDeadPeer(network, _ string, c syscall.RawConn) error {
	if !strings.HasPrefix(network, "tcp") {
		return nil
	}
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(pgDeadPeer.Milliseconds()))
	}); err != nil {
		return err
	}
	return serr
}
