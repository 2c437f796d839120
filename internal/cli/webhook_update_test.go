package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/store"
)

// webhook update sets and removes a webhook's rules; bad rules are a usage error
// that names the mistake and changes nothing.
func TestWebhookUpdateRules(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "sb.db")
	st := openRW(t, db)
	h, err := st.CreateWebhook(ctx, store.NewWebhook{SourceType: "github", Queue: "prs", Secret: "s3cretsecret", CreatedBy: "human:1"})
	if err != nil {
		t.Fatal(err)
	}
	id := itoa(h.ID)
	code, out, errs := cli(t, "", "webhook", "update", id, "--rules",
		`{"filter": {"actions": ["opened"]}, "key": "{/repository/full_name}#{/number}", "coalesce": true}`, "--db", db)
	if code != 0 || !strings.Contains(out, "rules set") {
		t.Fatalf("update: exit %d, %q %q", code, out, errs)
	}
	for _, bad := range []string{`{"filter": {"action": ["opened"]}}`, `{"key": "no pointer"}`, `{"filter": {"match": {"a/b": 1}}}`} {
		code, out, errs = cli(t, "", "webhook", "update", id, "--rules", bad, "--db", db)
		if code != 2 || out != "" || !strings.Contains(errs, "--rules:") {
			t.Errorf("update --rules %s: exit %d, %q %q, want a usage error", bad, code, out, errs)
		}
	}
	got, err := st.Webhook(ctx, h.ID)
	if err != nil || got.Rules["coalesce"] != true {
		t.Fatalf("after the refusals: %+v (%v), want the rules as set", got.Rules, err)
	}
	if code, out, errs = cli(t, "", "webhook", "update", id, "--rules", "{}", "--db", db); code != 0 || !strings.Contains(out, "rules removed") {
		t.Fatalf("update --rules {}: exit %d, %q %q", code, out, errs)
	}
	if code, _, errs = cli(t, "", "webhook", "update", "999", "--rules", "{}", "--db", db); code != 1 || !strings.Contains(errs, "unknown or deleted") {
		t.Fatalf("update of no webhook: exit %d, %q", code, errs)
	}
}
