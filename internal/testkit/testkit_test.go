package testkit

import (
	"os"
	"testing"
	"time"
)

func TestClockMovesOnlyWhenTold(t *testing.T) {
	start := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := NewClock(start)
	if !c.Now().Equal(start) || !c.Now().Equal(start) {
		t.Fatalf("Now = %v, want %v", c.Now(), start)
	}
	c.Add(90 * time.Second)
	if want := start.Add(90 * time.Second); !c.Now().Equal(want) {
		t.Fatalf("after Add, Now = %v, want %v", c.Now(), want)
	}
}

// The test module is built once and kept where the manifest contract accepts
// it: an executable no group or other may write.
func TestTestModuleBuiltOnce(t *testing.T) {
	first := TestModule(t)
	if again := TestModule(t); again != first {
		t.Fatalf("second call gave %s, first %s", again, first)
	}
	fi, err := os.Stat(first)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o755 {
		t.Fatalf("mode %04o, want 0755", fi.Mode().Perm())
	}
}
