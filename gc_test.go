package main

import (
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }

	debug.SetGCPercent(100)
	if got := tuneGC(getenv); got != serveGCPercent {
		t.Errorf("GOGC unset: tuneGC says %d, want %d", got, serveGCPercent)
	}
	if p := debug.SetGCPercent(100); p != serveGCPercent {
		t.Errorf("GOGC unset: the runtime's percent is %d, want %d", p, serveGCPercent)
	}

	// The runtime applied the operator's GOGC at start; tuneGC leaves it.
	env["GOGC"] = "50"
	debug.SetGCPercent(50)
	if got := tuneGC(getenv); got != 50 {
		t.Errorf("GOGC=50: tuneGC says %d", got)
	}
	if p := debug.SetGCPercent(100); p != 50 {
		t.Errorf("GOGC=50: the runtime's percent is %d, want it left at 50", p)
	}
}
