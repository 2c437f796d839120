package agent

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/store"
)

// An endpoint made as the Quick start makes it may not create webhooks: its
// session is told so, and which settings a human changes; one that may is told
// its ceiling. endpoint list and the board say the same in a few words.
func TestSessionsAreToldWhetherTheyMayCreateWebhooks(t *testing.T) {
	e := newEnv(t)
	ceiling := func(max int, sources ...string) func(*store.EndpointSpec) {
		return func(s *store.EndpointSpec) { s.MaxWebhooks, s.WebhookSources = &max, &sources }
	}
	quick, quickCred := e.endpoint("quick", []string{"inbox"}, nil)
	hooks, hooksCred := e.endpoint("hooks", []string{"inbox"}, nil, ceiling(2, "github", "stripe"),
		func(s *store.EndpointSpec) { s.WebhookQueues = &[]string{"inbox"} })
	sourceless, sourcelessCred := e.endpoint("sourceless", []string{"inbox"}, nil, ceiling(3))
	noVerb, noVerbCred := e.endpoint("noverb", []string{"inbox"}, store.TodoVerbs(), ceiling(2, "github"))
	for _, tc := range []struct {
		ep    store.Endpoint
		cred  string
		grant string
		says  []string
	}{
		{quick, quickCred, "none (ceiling 0)", []string{"create_webhook is withheld", "webhook ceiling is 0",
			fmt.Sprintf("switchboard endpoint update %d --max-webhooks N --webhook-sources", quick.ID)}},
		{hooks, hooksCred, "up to 2: github,stripe", []string{"you may create up to 2 with create_webhook",
			"source types github, stripe; queues inbox"}},
		{sourceless, sourcelessCred, "none (up to 3, but no source type allowed)", []string{"for no source type",
			fmt.Sprintf("switchboard endpoint update %d --webhook-sources", sourceless.ID)}},
		{noVerb, noVerbCred, "none (create_webhook not granted)", []string{"create_webhook is not granted",
			fmt.Sprintf("switchboard endpoint update %d --verbs", noVerb.ID)}},
	} {
		if got := WebhookGrant(tc.ep); got != tc.grant {
			t.Errorf("%s: WebhookGrant %q, want %q", tc.ep.AgentID, got, tc.grant)
		}
		got := e.dial(tc.cred, false).init.Instructions
		for _, want := range tc.says {
			if !strings.Contains(got, want) {
				t.Errorf("%s: the instructions do not say %q:\n%s", tc.ep.AgentID, want, got)
			}
		}
	}
}
