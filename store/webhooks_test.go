package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

func mustWebhook(t testing.TB, s *Store, n NewWebhook) Webhook {
	t.Helper()
	h, err := s.CreateWebhook(context.Background(), n)
	if err != nil {
		t.Fatalf("create webhook: %v", err)
	}
	return h
}

func ceilingEndpoint(t *testing.T, s *Store, max int, sources, queues []string) Endpoint {
	t.Helper()
	ep, _, err := s.CreateEndpoint(context.Background(), "bot", EndpointSpec{
		Queues: &queues, MaxWebhooks: &max, WebhookSources: &sources, WebhookQueues: &queues,
	}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	return ep
}

func TestCreateListDeleteWebhook(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	ep := ceilingEndpoint(t, s, 5, []string{"github"}, []string{"inbox"})
	a := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Description: "repo events",
		Secret: "one", CreatedBy: "agent:bot", EndpointID: ep.ID, CheckCeiling: true})
	b := mustWebhook(t, s, NewWebhook{SourceType: "stripe", Queue: "billing", Secret: "two", CreatedBy: "human:1"})
	if a.Token == "" || a.Token == b.Token || len(a.Token) < 40 {
		t.Fatalf("tokens %q %q", a.Token, b.Token)
	}
	if a.SecretEncrypted || a.EndpointID != ep.ID || a.Description != "repo events" || a.CreatedBy != "agent:bot" {
		t.Fatalf("created %+v", a)
	}

	mine, err := s.ListWebhooks(ctx, WebhookFilter{EndpointID: ep.ID})
	if err != nil || len(mine) != 1 || mine[0].ID != a.ID {
		t.Fatalf("endpoint's webhooks = %+v, %v", mine, err)
	}
	all, _ := s.ListWebhooks(ctx, WebhookFilter{})
	if len(all) != 2 || all[0].ID != b.ID {
		t.Fatalf("all webhooks newest first = %+v", all)
	}

	// An agent cannot delete what is not its endpoint's.
	if err := s.DeleteWebhook(ctx, b.ID, ep.ID, "agent:bot"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("delete another's webhook = %v, want ErrNotFound", err)
	}
	if err := s.DeleteWebhook(ctx, a.ID, ep.ID, "agent:bot"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteWebhook(ctx, a.ID, ep.ID, "agent:bot"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("second delete = %v, want ErrNotFound", err)
	}
	if _, _, err := s.WebhookByToken(ctx, a.Token); !errors.Is(err, ErrNotFound) {
		t.Fatalf("deleted token lookup = %v, want ErrNotFound", err)
	}
	cur, prev := rawSecrets(t, s, a.ID)
	if cur != "" || prev.Valid {
		t.Fatal("a deleted webhook still holds its secret")
	}
	if live, _ := s.ListWebhooks(ctx, WebhookFilter{EndpointID: ep.ID}); len(live) != 0 {
		t.Fatalf("deleted webhook still listed: %+v", live)
	}
	if with, _ := s.ListWebhooks(ctx, WebhookFilter{EndpointID: ep.ID, IncludeDeleted: true}); len(with) != 1 || with[0].DeletedAt == nil {
		t.Fatalf("IncludeDeleted = %+v", with)
	}
	if _, err := s.RotateWebhook(ctx, a.ID, 0, "new", time.Hour, "human:1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rotate deleted = %v, want ErrNotFound", err)
	}
	if _, _, err := s.WebhookByToken(ctx, "no-such-token"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown token = %v", err)
	}
}

func TestCreateWebhookRejectsBadInput(t *testing.T) {
	s := openTest(t, Options{})
	good := NewWebhook{SourceType: "github", Queue: "inbox", Secret: "x", CreatedBy: "human:1"}
	for name, mut := range map[string]func(*NewWebhook){
		"no source":      func(n *NewWebhook) { n.SourceType = "" },
		"bad queue":      func(n *NewWebhook) { n.Queue = "has space" },
		"no secret":      func(n *NewWebhook) { n.Secret = "" },
		"no creator":     func(n *NewWebhook) { n.CreatedBy = "" },
		"long text":      func(n *NewWebhook) { n.Description = strings.Repeat("d", maxDescription+1) },
		"ceiling, no ep": func(n *NewWebhook) { n.CheckCeiling = true },
	} {
		n := good
		mut(&n)
		if _, err := s.CreateWebhook(context.Background(), n); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

func TestWebhookCeiling(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	ep := ceilingEndpoint(t, s, 2, []string{"github", "standard"}, []string{"inbox", "ci"})
	n := func(src, q string) NewWebhook {
		return NewWebhook{SourceType: src, Queue: q, Secret: "x", CreatedBy: "agent:bot", EndpointID: ep.ID, CheckCeiling: true}
	}
	cases := []struct {
		name  string
		in    NewWebhook
		limit string
	}{
		{"source not allowed", n("slack", "inbox"), `source type "slack" is not allowed (allowed: github, standard)`},
		{"queue not allowed", n("github", "payroll"), `queue "payroll" is not allowed (allowed: inbox, ci)`},
	}
	for _, c := range cases {
		_, err := s.CreateWebhook(ctx, c.in)
		var ce *CeilingError
		if !errors.As(err, &ce) || !errors.Is(err, ErrCeilingExceeded) || ce.Limit != c.limit {
			t.Errorf("%s: %v; want limit %q", c.name, err, c.limit)
		}
	}

	// Concurrent creates share one writer; the count is taken inside each write,
	// so exactly max of them succeed.
	var wg sync.WaitGroup
	errs := make(chan error, 6)
	for i := 0; i < 6; i++ {
		wg.Add(1)
		go func() { defer wg.Done(); _, err := s.CreateWebhook(ctx, n("github", "inbox")); errs <- err }()
	}
	wg.Wait()
	close(errs)
	ok, over := 0, 0
	for err := range errs {
		var ce *CeilingError
		switch {
		case err == nil:
			ok++
		case errors.As(err, &ce) && ce.Limit == "at most 2 webhooks (2 exist)":
			over++
		default:
			t.Errorf("unexpected: %v", err)
		}
	}
	if ok != 2 || over != 4 {
		t.Fatalf("%d created, %d refused; want 2 and 4", ok, over)
	}

	// A deleted webhook frees its slot; a human's edit applies to the next create.
	live, _ := s.ListWebhooks(ctx, WebhookFilter{EndpointID: ep.ID})
	if err := s.DeleteWebhook(ctx, live[0].ID, ep.ID, "agent:bot"); err != nil {
		t.Fatal(err)
	}
	mustWebhook(t, s, n("standard", "ci"))
	zero := 0
	if _, err := s.UpdateEndpoint(ctx, ep.ID, EndpointSpec{MaxWebhooks: &zero}, "human:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateWebhook(ctx, n("github", "inbox")); !errors.Is(err, ErrCeilingExceeded) {
		t.Fatalf("after lowering the ceiling: %v", err)
	}
	// A human creates outside any ceiling.
	mustWebhook(t, s, NewWebhook{SourceType: "slack", Queue: "payroll", Secret: "x", CreatedBy: "human:1", EndpointID: ep.ID})

	if err := s.RevokeEndpoint(ctx, ep.ID, "human:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateWebhook(ctx, n("github", "inbox")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("revoked endpoint: %v, want ErrNotFound", err)
	}
}

func TestRotationOverlap(t *testing.T) {
	ctx := context.Background()
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	ep := ceilingEndpoint(t, s, 5, []string{"github"}, []string{"inbox"})
	h := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "first", CreatedBy: "agent:bot", EndpointID: ep.ID})

	secretsNow := func() []string {
		t.Helper()
		_, sec, err := s.WebhookByToken(ctx, h.Token)
		if err != nil {
			t.Fatal(err)
		}
		return sec
	}
	if got := secretsNow(); len(got) != 1 || got[0] != "first" {
		t.Fatalf("before rotation: %q", got)
	}
	if _, err := s.RotateWebhook(ctx, h.ID, ep.ID+1, "second", 24*time.Hour, "agent:other"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("rotate from another endpoint = %v, want ErrNotFound", err)
	}
	r, err := s.RotateWebhook(ctx, h.ID, ep.ID, "second", 24*time.Hour, "agent:bot")
	if err != nil {
		t.Fatal(err)
	}
	if r.RotatedAt == nil || r.PreviousExpiresAt == nil || !r.PreviousExpiresAt.Equal(clock.Now().Add(24*time.Hour).Truncate(time.Millisecond)) {
		t.Fatalf("rotated %+v", r)
	}
	if got := secretsNow(); len(got) != 2 || got[0] != "second" || got[1] != "first" {
		t.Fatalf("during grace: %q", got)
	}
	clock.Add(24*time.Hour - time.Second)
	if got := secretsNow(); len(got) != 2 {
		t.Fatalf("a second before the grace ends: %q", got)
	}
	clock.Add(time.Second)
	if got := secretsNow(); len(got) != 1 || got[0] != "second" {
		t.Fatalf("after grace: %q", got)
	}

	// A rotation during a grace period ends the older secret at once.
	if _, err := s.RotateWebhook(ctx, h.ID, ep.ID, "third", time.Hour, "agent:bot"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RotateWebhook(ctx, h.ID, ep.ID, "fourth", time.Hour, "agent:bot"); err != nil {
		t.Fatal(err)
	}
	if got := secretsNow(); len(got) != 2 || got[0] != "fourth" || got[1] != "third" {
		t.Fatalf("after two rotations: %q", got)
	}
	// Grace 0: the old secret stops at once.
	if _, err := s.RotateWebhook(ctx, h.ID, 0, "fifth", 0, "human:1"); err != nil {
		t.Fatal(err)
	}
	if got := secretsNow(); len(got) != 1 || got[0] != "fifth" {
		t.Fatalf("grace 0: %q", got)
	}
	audit, _ := s.ListAudit(ctx, AuditFilter{Target: webhookTarget(h.ID), Action: "webhook."})
	if len(audit) != 5 { // create + four rotations
		t.Fatalf("audit rows %d: %+v", len(audit), audit)
	}
}

// A signing secret is text: one that is not UTF-8, or holds a NUL, is refused on
// both databases (PostgreSQL would keep it changed, and it would verify nothing).
func TestWebhookSecretsAreText(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	for _, secret := range []string{"abc\xffdef", "abc\x00def"} {
		if _, err := s.CreateWebhook(ctx, NewWebhook{SourceType: "github", Queue: "prs", Secret: secret, CreatedBy: "human:cli"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("create with secret %q: %v, want ErrInvalid", secret, err)
		}
	}
	h, err := s.CreateWebhook(ctx, NewWebhook{SourceType: "github", Queue: "prs", Secret: "good secret", CreatedBy: "human:cli"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RotateWebhook(ctx, h.ID, 0, "bad\xff", 0, "human:cli"); !errors.Is(err, ErrInvalid) {
		t.Errorf("rotate to a secret that is not UTF-8: %v, want ErrInvalid", err)
	}
}
