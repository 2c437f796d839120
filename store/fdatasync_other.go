//go:build !linux

package store

import (
	"os"
	"syscall"
)

// fdatasync falls back to a plain fsync where there is no fdatasync, as SQLite does
// (not os.File.Sync, which on macOS asks for F_FULLFSYNC, a flush SQLite's FULL does
// not do unless told to). raw is for Linux (see rawSync); here the call is always
// the usual one.
func fdatasync(f *os.File, _ bool) error {
	for {
		err := syscall.Fsync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
