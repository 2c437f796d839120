package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// An agent written with the official MCP TypeScript SDK (tsclient/tour.mjs) works
// a todo it was rung for and meets refusals, while the SDK checks every answer
// against the verb's outputSchema (it throws on a mismatch, refusals included).
// Skips without Node.js or the npm registry, unless SWITCHBOARD_REQUIRE_EXTERNAL=1.
func TestTypeScriptSDKAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an npm install and a Node.js client (the race detector cannot see into them)")
	}
	dir, node := testkit.NPMInstall(t, "tsclient", "package.json", "package-lock.json", "tour.mjs")
	h := newHookEnv(t)
	_, cred := h.endpoint("ts-agent", []string{"inbox"}, nil, func(s *store.EndpointSpec) {
		max, sources, queues := 1, []string{"github"}, []string{"inbox"}
		s.MaxWebhooks, s.WebhookSources, s.WebhookQueues = &max, &sources, &queues
	})
	// A deadline, not a timed assertion: a hung client must not hang go test.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "tour.mjs", h.url, cred)
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
		if id, ok := strings.CutPrefix(lines.Text(), "session "); ok {
			h.waitAttached(id) // its GET stream is open: the ring can reach it
			td = h.addTodo("inbox", `{"from":"the test"}`)
			continue
		}
		report = lines.Text()
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tour.mjs: %v\n%s", err, stderr.String())
	}
	var seen struct {
		Tools            []string `json:"tools"`
		WithOutputSchema int      `json:"with_output_schema"`
		RangFor          string   `json:"rang_for"`
		Payload          string   `json:"payload"`
		Calls            []struct {
			Name  string  `json:"name"`
			Error *string `json:"error"`
		} `json:"calls"`
	}
	if err := json.Unmarshal([]byte(report), &seen); err != nil {
		t.Fatalf("tour.mjs said %q: %v\n%s", report, err, stderr.String())
	}
	all := store.AllVerbs()
	slices.Sort(all)
	if !slices.Equal(seen.Tools, all) || seen.WithOutputSchema != len(all) {
		t.Errorf("the SDK listed %v, %d with an outputSchema; want %v, each with one", seen.Tools, seen.WithOutputSchema, all)
	}
	if seen.RangFor != strconv.FormatInt(td.ID, 10) || seen.Payload != `{"from":"the test"}` {
		t.Errorf("rung for todo %s with payload %q; want %d", seen.RangFor, seen.Payload, td.ID)
	}
	var refused []string
	for _, c := range seen.Calls {
		if c.Error != nil {
			refused = append(refused, c.Name+":"+*c.Error)
		}
	}
	if want := []string{"complete:" + CodeConflict, "claim:" + CodeNotFound, "get_webhook_event:" + CodeNotFound}; !slices.Equal(refused, want) {
		t.Errorf("refusals %v, want %v", refused, want)
	}
	if h.todo(td.ID).State != store.StateDone {
		t.Errorf("the toured todo is %s", h.todo(td.ID).State)
	}
}
