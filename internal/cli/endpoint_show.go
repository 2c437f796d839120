package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/store"
)

// endpointShow prints one endpoint whole, revoked or not.
func endpointShow(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "endpoint show", endpointSynopsis)
	db := dbFlag(fs, env)
	asJSON := fs.Bool("json", false, "print JSON")
	id, rest, err := leadingID(fs, "endpoint", args)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	s, err := openStoreRO(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	ep, err := s.Endpoint(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env, ep)
	}
	writeEndpoint(env.stdout, ep)
	return nil
}

// writeEndpoint writes e for a person at a terminal, one setting a line.
func writeEndpoint(w io.Writer, e store.Endpoint) {
	list := func(l []string, none string) string {
		if len(l) == 0 {
			return none
		}
		return printable(strings.Join(l, ", "))
	}
	status := "active"
	if e.RevokedAt != nil {
		status = "revoked " + e.RevokedAt.Local().Format(time.DateTime)
	}
	lease := "300 s (built-in)"
	if e.DefaultLeaseTTL > 0 {
		lease = strconv.Itoa(e.DefaultLeaseTTL) + " s"
	}
	rate := "the server's default"
	if e.RatePerSecond > 0 || e.RateBurst > 0 {
		rate = fmt.Sprintf("%g a second, bursts of %d (0: the server's default)", e.RatePerSecond, e.RateBurst)
	}
	access := "none"
	if e.CFAccessIdentity != "" {
		access = printable(e.CFAccessIdentity)
	}
	fmt.Fprintf(w, "endpoint %d for agent %s (%s): %s\n", e.ID, e.AgentID, printable(e.AgentName), status)
	for _, row := range [][2]string{
		{"credential", e.CredentialHint},
		{"queues", list(e.Queues, "none")},
		{"verbs", list(e.Verbs, "none")},
		{"default lease", lease},
		{"webhooks", agent.WebhookGrant(e)},
		{"capabilities", list(e.Capabilities, "none")},
		{"tools allowed", list(e.ToolAllow, "all of the granted capabilities'")},
		{"tools denied", list(e.ToolDeny, "none")},
		{"rate", rate},
		{"cloudflare access", access},
		{"created", e.CreatedAt.Local().Format(time.DateTime)},
	} {
		fmt.Fprintf(w, "%-18s %s\n", row[0]+":", row[1])
	}
}
