package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// An agent on the official TypeScript SDK v2 client (tsclient2/drain.mjs)
// negotiates 2026-07-28, learns the lease contract from server/discover, hears
// the doorbell on its subscriptions/listen stream and drains the todo. Skips
// without Node.js or the npm registry, unless SWITCHBOARD_REQUIRE_EXTERNAL=1.
func TestTypeScriptSDKv2StatelessAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an npm install and a Node.js client")
	}
	dir, node := testkit.NPMInstall(t, "tsclient2", "package.json", "package-lock.json", "drain.mjs")
	e := newEnv(t)
	_, cred := e.endpoint("ts-v2", []string{"inbox"}, nil)
	// A deadline, not a timed assertion: a hung client must not hang go test.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "drain.mjs", e.url, cred)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := bufio.NewScanner(stdout)
	var td store.Todo
	var report string
	for lines.Scan() {
		if lines.Text() == "listening" {
			td = e.addTodo("inbox", `{"from":"the test"}`)
			continue
		}
		report = lines.Text()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("drain.mjs: %v\n%s", err, stderr.String())
	}
	var seen struct {
		Protocol      string            `json:"protocol"`
		LeaseContract bool              `json:"leaseContract"`
		Ring          map[string]string `json:"ring"`
		Claimed       int64             `json:"claimed"`
		State         string            `json:"state"`
	}
	if err := json.Unmarshal([]byte(report), &seen); err != nil {
		t.Fatalf("report %q: %v\n%s", report, err, stderr.String())
	}
	if seen.Protocol != statelessVersion || !seen.LeaseContract || seen.Ring["todo_id"] != fmt.Sprint(td.ID) ||
		seen.Claimed != td.ID || seen.State != "done" {
		t.Fatalf("the v2 agent saw %+v (todo %d)", seen, td.ID)
	}
}
