package testkit

import (
	"syscall"
	"testing"
	"time"
)

// ProcessCPU is the user and system CPU time this process has used: a
// benchmark's CPU per operation moves far less with a busy machine than its
// rate does.
func ProcessCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
