package store

import (
	"context"
	"errors"
	"testing"
)

// The store refuses a word outside its lists itself, whichever edge sends it,
// and writes nothing: no endpoint, no webhook, no audit row.
func TestStoreRefusesUnknownWords(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	verbs, sources := []string{"claim", "teleport"}, []string{"github", "carrier-pigeon"}
	ep, _, err := s.CreateEndpoint(ctx, "bot", EndpointSpec{Queues: &[]string{"inbox"}, Verbs: &[]string{"claim"}}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	refusals := map[string]func() error{
		"create endpoint, verb": func() error {
			_, _, err := s.CreateEndpoint(ctx, "bot2", EndpointSpec{Verbs: &verbs}, "human:1")
			return err
		},
		"create endpoint, ceiling source": func() error {
			_, _, err := s.CreateEndpoint(ctx, "bot2", EndpointSpec{WebhookSources: &sources}, "human:1")
			return err
		},
		"update endpoint, verb": func() error {
			_, err := s.UpdateEndpoint(ctx, ep.ID, EndpointSpec{Verbs: &verbs}, "human:1")
			return err
		},
		"update endpoint, ceiling source": func() error {
			_, err := s.UpdateEndpoint(ctx, ep.ID, EndpointSpec{WebhookSources: &sources}, "human:1")
			return err
		},
		"create webhook": func() error {
			_, err := s.CreateWebhook(ctx, NewWebhook{SourceType: "carrier-pigeon", Queue: "inbox", Secret: "x", CreatedBy: "human:1"})
			return err
		},
	}
	before := auditDetails(t, s, "")
	for name, refuse := range refusals {
		err := refuse()
		var we *UnknownWordError
		if !errors.As(err, &we) || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want an UnknownWordError that is ErrInvalid", name, err)
			continue
		}
		if we.Value != "teleport" && we.Value != "carrier-pigeon" {
			t.Errorf("%s: names %q, not the unknown word", name, we.Value)
		}
	}
	if after := auditDetails(t, s, ""); len(after) != len(before) {
		t.Errorf("refusals wrote audit rows: %v", after[len(before):])
	}
	eps, err := s.ListEndpoints(ctx, true)
	if err != nil || len(eps) != 1 || len(eps[0].Verbs) != 1 || len(eps[0].Ceiling.Sources) != 0 {
		t.Errorf("endpoints after the refusals: %+v, %v", eps, err)
	}
	hooks, err := s.ListWebhooks(ctx, WebhookFilter{IncludeDeleted: true})
	if err != nil || len(hooks) != 0 {
		t.Errorf("webhooks after the refusals: %+v, %v", hooks, err)
	}
}

// The message names the word and the list, once.
func TestUnknownWordMessage(t *testing.T) {
	err := CheckVerbs([]string{"claim", "teleport"})
	want := `unknown verb "teleport" (known: list_todos,claim,claim_next,heartbeat,complete,fail,release,get_default_lease,set_default_lease,request_approval,` +
		`create_webhook,list_webhooks,rotate_webhook,delete_webhook,list_webhook_events,get_webhook_event,replay_webhook_event,update_webhook,add_todo)`
	if err == nil || err.Error() != want {
		t.Errorf("CheckVerbs: %v\nwant %s", err, want)
	}
	if err := CheckSourceTypes(SourceTypes()...); err != nil {
		t.Errorf("CheckSourceTypes of the list itself: %v", err)
	}
}

func TestValidSourceType(t *testing.T) {
	for _, s := range SourceTypes() {
		if !ValidSourceType(s) {
			t.Errorf("ValidSourceType(%q) = false for a listed type", s)
		}
	}
	if len(SourceTypes()) != 6 {
		t.Errorf("SourceTypes = %v, want the six contract types", SourceTypes())
	}
	for _, s := range []string{"", "GitHub", "github ", "svix", "standardwebhooks", "bitbucket"} {
		if ValidSourceType(s) {
			t.Errorf("ValidSourceType(%q) = true", s)
		}
	}
	// A caller that changes its copy widens nothing.
	SourceTypes()[0] = "bitbucket"
	if ValidSourceType("bitbucket") {
		t.Error("a changed copy of SourceTypes widened the list")
	}
}
