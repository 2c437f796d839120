package packaging

import (
	"errors"
	"os/exec"
	"regexp"
	"strconv"
	"testing"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// maxExposure is the highest `systemd-analyze security` exposure the unit may
// have. The issue sets 2.0; the unit scores 1.1 today, and the margin is there
// for directives a later systemd starts to count, not for loosening the unit.
const maxExposure = 2.0

// needTool finds an external program or skips the test, unless the run demands
// every external tool (SWITCHBOARD_REQUIRE_EXTERNAL=1), in which case it fails.
func needTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err == nil {
		return path
	}
	testkit.SkipOrFail(t, "%s not installed (apt-get install systemd / dash): %v", name, err)
	return ""
}

var exposureLine = regexp.MustCompile(`Overall exposure level for switchboard\.service: ([0-9]+\.[0-9]+)`)

func TestServiceExposure(t *testing.T) {
	analyze := needTool(t, "systemd-analyze")
	// --threshold makes systemd-analyze itself exit non-zero above 2.0 (it takes
	// tenths); we also parse the score so a failure says what it was.
	cmd := exec.Command(analyze, "security", "--offline=true", "--threshold=20", "switchboard.service")
	out, err := cmd.CombinedOutput()
	m := exposureLine.FindSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze printed no exposure level (err %v):\n%s", err, out)
	}
	score, perr := strconv.ParseFloat(string(m[1]), 64)
	if perr != nil {
		t.Fatalf("parse exposure %q: %v", m[1], perr)
	}
	t.Logf("switchboard.service exposure: %.1f", score)
	if score > maxExposure {
		t.Errorf("exposure %.1f is above %.1f; what is exposed:\n%s", score, maxExposure, out)
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		t.Fatalf("run systemd-analyze: %v", err)
	}
	if err != nil && score <= maxExposure {
		t.Errorf("systemd-analyze failed although the score is %.1f: %v\n%s", score, err, out)
	}
}

func TestScriptsParse(t *testing.T) {
	sh := needTool(t, "sh")
	bash := needTool(t, "bash")
	tests := []struct {
		shell, file string
	}{
		{sh, "deb/postinst.sh"},
		{sh, "deb/prerm.sh"},
		{sh, "deb/postrm.sh"},
		{bash, "build.sh"},
		{bash, "check-debs.sh"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			if out, err := exec.Command(tt.shell, "-n", tt.file).CombinedOutput(); err != nil {
				t.Errorf("%s -n %s: %v\n%s", tt.shell, tt.file, err, out)
			}
		})
	}
}
