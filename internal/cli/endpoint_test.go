package cli

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// endpoint revoke says what became of the todos the agent holds: back on their
// queues, or kept because another live endpoint speaks for the agent.
func TestEndpointRevokeSaysWhatBecameOfTheTodos(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	ctx := context.Background()
	st := openRW(t, db)
	q := []string{"inbox"}
	var eps []store.Endpoint
	for range 2 {
		ep, _, err := st.CreateEndpoint(ctx, "bot", store.EndpointSpec{Queues: &q}, "human:1")
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, ep)
	}
	td, err := st.AddTodo(ctx, store.NewTodo{Queue: "inbox", Payload: "x"})
	if err == nil {
		_, err = st.Claim(ctx, store.Ack{ID: td.ID, Owner: "agent:bot"}, time.Hour)
	}
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"stay claimed: another live endpoint speaks for that agent",
		"the todo its agent held is back on its queue"} {
		code, out, errs := cli(t, "", "endpoint", "revoke", strconv.FormatInt(eps[i].ID, 10), "--db", db)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("revoke %d: exit %d, %q %q; want %q", i, code, out, errs, want)
		}
	}
}

// The commands that change an endpoint or webhook by its ID report a mistyped --db
// and leave no database behind: a new one holds nothing to change, and "unknown
// endpoint" would send the operator looking in the wrong place.
func TestCommandsOnAStoredThingRefuseAMissingDatabase(t *testing.T) {
	for _, args := range [][]string{
		{"endpoint", "revoke", "1"},
		{"endpoint", "update", "1", "--queues", "inbox"},
		{"webhook", "delete", "1"},
		{"webhook", "rotate", "1"},
	} {
		typo := filepath.Join(t.TempDir(), "typo.db")
		code, out, errs := cli(t, "", append(args, "--db", typo)...)
		if code != 1 || !strings.Contains(errs, "no database at "+typo) {
			t.Errorf("%q on a mistyped --db: exit %d, %q %q", args, code, out, errs)
		}
		if _, err := os.Stat(typo); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%q on a mistyped --db made %s (%v)", args, typo, err)
		}
	}
}

// An agent of capability modules alone needs no queue: endpoint create takes
// --capabilities without --queues, and gives it no verbs; verbs without queues,
// or neither queues nor capabilities, are refused.
func TestEndpointCreateForModulesAlone(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	code, _, errs := runCLI(t, map[string]string{"SWITCHBOARD_LISTEN": "127.0.0.1:1"},
		"endpoint", "create", "--agent", "tools", "--capabilities", "everything", "--db", db)
	if code != 0 {
		t.Fatalf("create for modules alone: exit %d %q", code, errs)
	}
	st := openRO(t, db)
	eps, err := st.ListEndpoints(context.Background(), false)
	st.Close()
	if err != nil || len(eps) != 1 || len(eps[0].Queues) != 0 || len(eps[0].Verbs) != 0 || eps[0].Capabilities[0] != "everything" {
		t.Fatalf("endpoint for modules alone: %+v, %v", eps, err)
	}
	// Nor may an update leave it so.
	for _, args := range [][]string{{"--verbs", "claim_next,list_todos"}, {"--capabilities", ""}} {
		if code, _, errs := cli(t, "", append([]string{"endpoint", "update", "1", "--db", db}, args...)...); code != 2 ||
			!strings.Contains(errs, "endpoint 1 would") {
			t.Errorf("update %v: exit %d %q", args, code, errs)
		}
	}
	if code, _, errs := cli(t, "", "endpoint", "update", "1", "--queues", "inbox", "--verbs", "claim_next", "--db", db); code != 0 {
		t.Errorf("update to queue work: exit %d %q", code, errs)
	}
	for _, args := range [][]string{
		{"--agent", "x", "--capabilities", "everything", "--verbs", "claim_next"},
		{"--agent", "x"},
	} {
		if code, _, errs := cli(t, "", append(append([]string{"endpoint", "create"}, args...), "--db", db)...); code != 2 ||
			!strings.Contains(errs, "queues") {
			t.Errorf("create %v: exit %d %q", args, code, errs)
		}
	}
}

// endpoint create prints, beside the credential, how to point Claude Code at
// the endpoint with the credential kept in the environment: a .mcp.json entry
// and a claude mcp add line that name the variable, never the secret.
func TestEndpointCreatePrintsTheClientSetup(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	code, out, stderr := runCLI(t, map[string]string{"SWITCHBOARD_BASE_URL": "https://sb.example.net/"},
		"endpoint", "create", "--db", db, "--agent", "reviewer", "--queues", "inbox")
	if code != 0 {
		t.Fatalf("endpoint create: exit %d: %s", code, stderr)
	}
	_, rest, _ := strings.Cut(out, "credential: ")
	cred, _, _ := strings.Cut(rest, "\n")
	if !strings.HasPrefix(cred, "sb_") {
		t.Fatalf("no credential in %q", out)
	}
	if !strings.Contains(out, "\n  export SWITCHBOARD_CREDENTIAL="+cred+"\n") ||
		!strings.Contains(out, `claude mcp add --transport http switchboard https://sb.example.net/mcp --header "Authorization: Bearer ${SWITCHBOARD_CREDENTIAL:?export SWITCHBOARD_CREDENTIAL first}"`) {
		t.Fatalf("endpoint create printed:\n%s", out)
	}
	start, end := strings.Index(out, "\n{"), strings.Index(out, "\n}\n")
	if start < 0 || end < start {
		t.Fatalf("no .mcp.json in:\n%s", out)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Type    string            `json:"type"`
			URL     string            `json:"url"`
			Headers map[string]string `json:"headers"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal([]byte(out[start:end+2]), &cfg); err != nil {
		t.Fatalf(".mcp.json: %v\n%s", err, out)
	}
	if srv := cfg.MCPServers["switchboard"]; srv.Type != "http" || srv.URL != "https://sb.example.net/mcp" ||
		srv.Headers["Authorization"] != "Bearer ${SWITCHBOARD_CREDENTIAL}" {
		t.Fatalf(".mcp.json %+v", cfg)
	}
	if strings.Count(out, cred) != 2 { // the credential line and the export line, nowhere else
		t.Fatalf("the credential is printed %d times:\n%s", strings.Count(out, cred), out)
	}
}

// endpoint list (newest first) says whether each agent may create webhooks: an endpoint made
// as the Quick start makes it may not, and the list says why.
func TestEndpointListShowsTheWebhookCeiling(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	createEndpoint(t, db, "--agent", "quick", "--queues", "inbox")
	createEndpoint(t, db, "--agent", "hooks", "--queues", "inbox", "--max-webhooks", "2", "--webhook-sources", "github,stripe")
	code, out, stderr := cli(t, "", "endpoint", "list", "--db", db)
	if code != 0 {
		t.Fatalf("endpoint list: exit %d: %s", code, stderr)
	}
	lines := strings.Split(out, "\n")
	if len(lines) < 3 || !strings.Contains(lines[0], "WEBHOOKS IT MAY CREATE") || !strings.Contains(lines[2], "none (ceiling 0)") ||
		!strings.Contains(lines[1], "up to 2: github,stripe") {
		t.Fatalf("endpoint list:\n%s", out)
	}
}

// A word outside the store's lists is a mistake on the command line: exit 2,
// the word and the list named once, nothing stored. A ceiling's source types
// were not checked before, and stored as given.
func TestCLIRefusesUnknownWords(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"endpoint", "create", "--agent", "bot", "--queues", "inbox", "--verbs", "claim,teleport"},
			`switchboard endpoint: unknown verb "teleport" (known: ` + strings.Join(store.EveryVerb(), ",") + ")\n"},
		{[]string{"endpoint", "create", "--agent", "bot", "--queues", "inbox", "--webhook-sources", "github,pigeon"},
			`switchboard endpoint: unknown webhook source type "pigeon" (known: github,stripe,slack,standard,gitlab,generic)` + "\n"},
		{[]string{"webhook", "create", "--source", "pigeon", "--queue", "inbox", "--base-url", "https://sb.example"},
			"switchboard webhook: --source must be one of github, stripe, slack, standard, gitlab, generic\n"},
	} {
		code, _, errs := cli(t, "", append(c.args, "--db", db)...)
		if code != 2 || errs != c.want {
			t.Errorf("%v: exit %d %q\nwant exit 2 %q", c.args, code, errs, c.want)
		}
	}
	if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused command made the database: %v", err)
	}
}
