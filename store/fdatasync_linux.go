package store

import (
	"os"
	"runtime"
	"syscall"
)

// fdatasync sends f's data, and its size if it grew, to the disk, as SQLite's own
// commits do here (see syncWithFdatasync).
//
// With more than one P it is a raw system call: the writer keeps its P while the
// disk works, and the other Ps run everything else. Made the usual way, the
// runtime's monitor finds the P in a system call after 20 µs and hands it to
// another thread, and the writer has to win a P back once the sync returns; as the
// writer syncs back to back under load, that kept the monitor waking every 20 µs
// and cost thread switches on each sync (in switchboard bench's drain: 12–14
// context switches a todo instead of 7, and 2–15% more of the server's CPU a todo,
// in 5 interleaved pairs). The price is that a stop-the-world (the collector's)
// waits for the sync in progress to end: on a failing disk, as long as it takes.
// With one P, a raw call would stop every goroutine for the sync, so there the
// usual call stays.
func fdatasync(f *os.File) error {
	return fdatasyncFd(f.Fd(), runtime.GOMAXPROCS(0) > 1)
}

func fdatasyncFd(fd uintptr, raw bool) error {
	for {
		var err error
		if raw {
			if _, _, e := syscall.RawSyscall(syscall.SYS_FDATASYNC, fd, 0, 0); e != 0 {
				err = e
			}
		} else {
			err = syscall.Fdatasync(int(fd))
		}
		if err != syscall.EINTR {
			return err
		}
	}
}
