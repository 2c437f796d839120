package store

import (
	"os"
	"syscall"
)

// fdatasync sends f's data, and its size if it grew, to the disk, as SQLite's own
// commits do here (see syncWithFdatasync). raw makes it a raw system call, which
// keeps the goroutine's P for the sync's duration (see rawSync for when).
func fdatasync(f *os.File, raw bool) error {
	return fdatasyncFd(f.Fd(), raw)
}

func fdatasyncFd(fd uintptr, raw bool) error {
	call := syscall.Syscall
	if raw {
		call = syscall.RawSyscall
	}
	for {
		if _, _, e := call(syscall.SYS_FDATASYNC, fd, 0, 0); e != syscall.EINTR {
			if e != 0 {
				return e
			}
			return nil
		}
	}
}
