package cli

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// banner is serve's first line: where it listens, on which database, and which
// build. The version goes last, named: "switchboard dev listening" read as a
// mode of serve rather than a build without a release version.
func banner(where, db, version string) string {
	v := "version " + version
	if version == "dev" {
		v += ", an unreleased build"
	}
	return fmt.Sprintf("switchboard listening on %s (database %s, %s)", where, db, v)
}

// invokedAs is how the user runs this program, for the commands it suggests:
// `go run .` for a binary that go run built (in a temporary go-build directory
// the user never typed), the bare name for one found on the PATH, else the path
// as it was typed (./switchboard).
func invokedAs(arg0 string) string {
	switch {
	case arg0 == "":
		return "switchboard"
	case strings.Contains(filepath.ToSlash(arg0), "/go-build"):
		return "go run ."
	case filepath.IsAbs(arg0):
		if p, err := exec.LookPath(filepath.Base(arg0)); err == nil && p == arg0 {
			return filepath.Base(arg0)
		}
	}
	return arg0
}
