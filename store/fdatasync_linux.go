package store

import (
	"os"
	"syscall"
)

// fdatasync sends f's data, and its size if it grew, to the disk, as SQLite's own
// commits do here (see syncWithFdatasync).
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
