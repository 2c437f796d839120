package cli

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/store"
)

// runCLI runs a command in-process with the given SWITCHBOARD_* environment.
func runCLI(t *testing.T, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	e := &environ{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(k string) string { return env[k] }}
	code = run(context.Background(), e, args)
	return code, out.String(), errb.String()
}

func newKey(t *testing.T, b byte) string {
	t.Helper()
	return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{b}, 32))
}

var (
	urlLine    = regexp.MustCompile(`ingest URL: +(\S+)`)
	secretLine = regexp.MustCompile(`signing secret: +(\S+)`)
)

func secretsOf(t *testing.T, db, key, token string) []string {
	t.Helper()
	opts := store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if key != "" {
		k, err := store.ParseSecretKey(key)
		if err != nil {
			t.Fatal(err)
		}
		opts.SecretKey = k
	}
	s, err := store.Open(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, secrets, err := s.WebhookByToken(context.Background(), token)
	if err != nil {
		t.Fatal(err)
	}
	return secrets
}

func TestWebhookCommands(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	env := map[string]string{"SWITCHBOARD_DB": db, "SWITCHBOARD_BASE_URL": "https://sb.example.net/"}

	if code, _, errs := runCLI(t, env, "webhook", "create", "--source", "myspace", "--queue", "inbox"); code != 2 || !strings.Contains(errs, "github, stripe") {
		t.Fatalf("unknown source: exit %d, %q", code, errs)
	}
	// A base URL without a scheme would print an ingest URL no producer can call.
	for _, bad := range []string{"sb.example.net", "sb.example.net:8443", "ftp://sb.example.net",
		"https://sb.example.net/?x=1", "https://sb.example.net/#top", "https://ops@sb.example.net"} {
		if code, _, errs := runCLI(t, env, "webhook", "create", "--source", "github", "--queue", "inbox", "--base-url", bad); code != 2 || !strings.Contains(errs, "base URL") {
			t.Fatalf("create --base-url %s: exit %d, %q", bad, code, errs)
		}
	}
	code, out, errs := runCLI(t, env, "webhook", "create", "--source", "standard", "--queue", "inbox", "--description", "billing events")
	if code != 0 {
		t.Fatalf("create: exit %d, %s", code, errs)
	}
	u, sec := urlLine.FindStringSubmatch(out), secretLine.FindStringSubmatch(out)
	if u == nil || sec == nil || !strings.HasPrefix(u[1], "https://sb.example.net/webhooks/w/") || !strings.HasPrefix(sec[1], "whsec_") {
		t.Fatalf("create printed:\n%s", out)
	}
	if !strings.Contains(out, "stored as plaintext") {
		t.Fatalf("create without a key does not say the secret is plaintext:\n%s", out)
	}
	if !strings.Contains(out, "into the producer's webhook settings") || strings.Contains(out, "mints its own") {
		t.Fatalf("create for a producer that takes our secret:\n%s", out)
	}
	// Stripe issues its own secret: the minted one is for test tools, and the
	// output says how to hand over the real one.
	if _, out, _ := runCLI(t, env, "webhook", "create", "--source", "stripe", "--queue", "inbox"); !strings.Contains(out, "Stripe mints its own signing secret") ||
		!strings.Contains(out, "webhook rotate 2 --secret-stdin") || strings.Contains(out, "into the producer's webhook settings") {
		t.Fatalf("create for Stripe:\n%s", out)
	}
	runCLI(t, env, "webhook", "delete", "2")
	token := strings.TrimPrefix(u[1], "https://sb.example.net/webhooks/w/")
	if got := secretsOf(t, db, "", token); len(got) != 1 || got[0] != sec[1] {
		t.Fatalf("stored secret %q, printed %q", got, sec[1])
	}

	code, out, _ = runCLI(t, env, "webhook", "list")
	if code != 0 || !strings.Contains(out, u[1]) || strings.Contains(out, sec[1]) || !strings.Contains(out, "plaintext") {
		t.Fatalf("list: exit %d\n%s", code, out)
	}
	code, out, _ = runCLI(t, env, "webhook", "list", "--json")
	var listed []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &listed) != nil || len(listed) != 1 || listed[0]["ingest_url"] != u[1] ||
		listed[0]["description"] != "billing events" || strings.Contains(out, sec[1]) || strings.Contains(out, "signing_secret") {
		t.Fatalf("list --json: exit %d\n%s", code, out)
	}

	code, out, errs = runCLI(t, env, "webhook", "rotate", "1", "--grace", "1h")
	newSec := secretLine.FindStringSubmatch(out)
	if code != 0 || newSec == nil || newSec[1] == sec[1] || !strings.Contains(out, "still verifies until") || strings.Contains(errs, "no longer verifies") {
		t.Fatalf("rotate: exit %d\n%s", code, out)
	}
	if got := secretsOf(t, db, "", token); len(got) != 2 || got[0] != newSec[1] || got[1] != sec[1] {
		t.Fatalf("after rotate: %q", got)
	}
	// A second rotation within the grace ends the first secret's: it says so.
	code, out, errs = runCLI(t, env, "webhook", "rotate", "1", "--grace", "1h")
	if code != 0 || !strings.Contains(errs, "the secret before it, still in its grace from the last rotation, no longer verifies") {
		t.Fatalf("second rotate: exit %d\n%s%s", code, out, errs)
	}
	if got := secretsOf(t, db, "", token); len(got) != 2 || got[1] != newSec[1] {
		t.Fatalf("after the second rotate: %q, want the first rotation's secret kept as the previous one", got)
	}

	if code, out, _ = runCLI(t, env, "webhook", "delete", "1"); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("delete: exit %d %q", code, out)
	}
	if code, _, errs = runCLI(t, env, "webhook", "delete", "1"); code != 1 || !strings.Contains(errs, "unknown or already deleted") {
		t.Fatalf("second delete: exit %d %q", code, errs)
	}
	if _, out, _ = runCLI(t, env, "webhook", "list", "--json"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("list after delete: %s", out)
	}
	if _, out, _ = runCLI(t, env, "webhook", "list", "--all"); !strings.Contains(out, "deleted") {
		t.Fatalf("list --all after delete:\n%s", out)
	}
	if code, _, _ = runCLI(t, env, "webhook", "create", "--source", "github", "--queue", "inbox", "--endpoint", "42"); code != 1 {
		t.Fatalf("create for an unknown endpoint: exit %d", code)
	}
}

func TestSecretsReencryptCommand(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "sb.db")
	plain := map[string]string{"SWITCHBOARD_DB": db}
	var tokens []string
	for _, src := range []string{"github", "stripe"} {
		code, out, errs := runCLI(t, plain, "webhook", "create", "--source", src, "--queue", "inbox", "--json")
		var v map[string]any
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
			t.Fatalf("create: exit %d %s", code, errs)
		}
		tokens = append(tokens, strings.TrimPrefix(v["ingest_url"].(string), "http://127.0.0.1:8080/webhooks/w/"))
	}
	if code, _, errs := runCLI(t, plain, "secrets", "reencrypt"); code != 2 || !strings.Contains(errs, "no secret encryption key") {
		t.Fatalf("without a key: exit %d %q", code, errs)
	}

	key := newKey(t, 7)
	keyed := map[string]string{"SWITCHBOARD_DB": db, "SWITCHBOARD_SECRET_ENCRYPTION_KEY": key}
	if code, out, errs := runCLI(t, keyed, "secrets", "reencrypt"); code != 0 || !strings.Contains(out, "encrypted 2 ") {
		t.Fatalf("reencrypt: exit %d %q %q", code, out, errs)
	}
	if code, out, _ := runCLI(t, keyed, "secrets", "reencrypt"); code != 0 || !strings.Contains(out, "nothing to re-encrypt") {
		t.Fatalf("second reencrypt: exit %d %q", code, out)
	}
	if _, out, _ := runCLI(t, plain, "webhook", "list"); strings.Count(out, "encrypted") != 2 {
		t.Fatalf("list after reencrypt:\n%s", out)
	}
	for _, tok := range tokens {
		if got := secretsOf(t, db, key, tok); len(got) != 1 || got[0] == "" {
			t.Fatalf("secret after reencrypt: %q", got)
		}
	}

	// Without the key, a new secret would sit as plaintext beside the sealed ones:
	// refused (the CLI run outside the service, where systemd's credential is not
	// visible), and nothing is created.
	if code, _, errs := runCLI(t, plain, "webhook", "create", "--source", "github", "--queue", "inbox", "--json"); code != 1 ||
		!strings.Contains(errs, "stored as plaintext") || !strings.Contains(errs, "--secret-key-file") {
		t.Fatalf("keyless create beside sealed secrets: exit %d %q", code, errs)
	}
	if _, out, _ := runCLI(t, plain, "webhook", "list"); strings.Count(out, "/webhooks/w/") != 2 {
		t.Fatalf("a refused create left a webhook:\n%s", out)
	}

	// Another key is refused rather than mixed in.
	other := map[string]string{"SWITCHBOARD_DB": db, "SWITCHBOARD_SECRET_ENCRYPTION_KEY": newKey(t, 8)}
	if code, _, errs := runCLI(t, other, "secrets", "reencrypt"); code != 1 || !strings.Contains(errs, "does not open 2 of the 2") {
		t.Fatalf("other key: exit %d %q", code, errs)
	}
	// The key from a file (here systemd's credentials directory) seals new secrets too,
	// and a key given two ways is a mistake.
	if err := os.WriteFile(filepath.Join(dir, credentialName), []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	creds := map[string]string{"SWITCHBOARD_DB": db, "CREDENTIALS_DIRECTORY": dir}
	if code, out, errs := runCLI(t, creds, "webhook", "create", "--source", "slack", "--queue", "inbox"); code != 0 || strings.Contains(out, "plaintext") ||
		strings.Contains(errs, "warning") {
		t.Fatalf("create with the credential: exit %d %q %q", code, out, errs)
	}
	// A key file its group may read (as the package makes it) works quietly; one
	// anybody may read still works, with a warning.
	grouped := filepath.Join(dir, "grouped.key")
	if err := os.WriteFile(grouped, []byte(key+"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, plain, "secrets", "reencrypt", "--secret-key-file", grouped); code != 0 || strings.Contains(errs, "warning") {
		t.Fatalf("a group-readable key file: exit %d %q", code, errs)
	}
	loose := filepath.Join(dir, "loose.key")
	if err := os.WriteFile(loose, []byte(key+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(loose, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if code, _, errs := runCLI(t, plain, "secrets", "reencrypt", "--secret-key-file", loose); code != 0 ||
		!strings.Contains(errs, "can be read by any user (mode 0644)") {
		t.Fatalf("a world-readable key file: exit %d %q", code, errs)
	}
	both := map[string]string{"SWITCHBOARD_DB": db, "SWITCHBOARD_SECRET_ENCRYPTION_KEY": key}
	if code, _, errs := runCLI(t, both, "secrets", "reencrypt", "--secret-key-file", filepath.Join(dir, credentialName)); code != 2 || !strings.Contains(errs, "one way") {
		t.Fatalf("key given twice: exit %d %q", code, errs)
	}
}

// Rotating the encryption key from the CLI: the new key with the old one as
// previous reseals everything, after which the new key alone opens it all.
func TestSecretsKeyRotationCommand(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "sb.db")
	oldKey, newK := newKey(t, 3), newKey(t, 4)
	old := map[string]string{"SWITCHBOARD_DB": db, "SWITCHBOARD_SECRET_ENCRYPTION_KEY": oldKey}
	code, out, errs := runCLI(t, old, "webhook", "create", "--source", "github", "--queue", "inbox", "--json")
	var v map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &v) != nil {
		t.Fatalf("create: exit %d %s", code, errs)
	}
	token := strings.TrimPrefix(v["ingest_url"].(string), "http://127.0.0.1:8080/webhooks/w/")
	secret := v["signing_secret"].(string)

	// The previous key arrives as systemd would load it for the rotation.
	if err := os.WriteFile(filepath.Join(dir, previousCredentialName), []byte(oldKey+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rotating := map[string]string{"SWITCHBOARD_DB": db, "SWITCHBOARD_SECRET_ENCRYPTION_KEY": newK, "CREDENTIALS_DIRECTORY": dir}
	if code, out, errs := runCLI(t, rotating, "secrets", "reencrypt"); code != 0 || !strings.Contains(out, "encrypted 1 ") {
		t.Fatalf("reencrypt with the previous key: exit %d %q %q", code, out, errs)
	}
	if got := secretsOf(t, db, newK, token); len(got) != 1 || got[0] != secret {
		t.Fatalf("secret under the new key alone: %q", got)
	}
	// A previous key without a new one is a mistake.
	onlyOld := map[string]string{"SWITCHBOARD_DB": db, "SWITCHBOARD_PREVIOUS_SECRET_ENCRYPTION_KEY": oldKey}
	if code, _, errs := runCLI(t, onlyOld, "secrets", "reencrypt"); code != 2 || !strings.Contains(errs, "needs the new one") {
		t.Fatalf("previous key alone: exit %d %q", code, errs)
	}
}

func TestServeRefusesWrongSecretKey(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	key := newKey(t, 1)
	env := map[string]string{"SWITCHBOARD_DB": db, "SWITCHBOARD_SECRET_ENCRYPTION_KEY": key}
	if code, _, errs := runCLI(t, env, "webhook", "create", "--source", "github", "--queue", "inbox"); code != 0 {
		t.Fatalf("create: %s", errs)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for name, k := range map[string]string{"wrong key": newKey(t, 2), "no key": ""} {
		cfg := server.Config{DB: db}
		if k != "" {
			cfg.SecretKey, _ = store.ParseSecretKey(k)
		}
		cfg.Logger = quiet
		srv, err := server.New(context.Background(), cfg)
		if err == nil {
			srv.Close()
			t.Fatalf("%s: serve started", name)
		}
		if !errors.Is(err, store.ErrSecretKey) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	// Through the command line: one clear line, exit 1, before listening.
	env["SWITCHBOARD_SECRET_ENCRYPTION_KEY"] = newKey(t, 3)
	code, out, errs := runCLI(t, env, "serve", "--listen", "127.0.0.1:0")
	if code != 1 || strings.Contains(out, "listening") || !strings.Contains(errs, "is it the key they were encrypted with") {
		t.Fatalf("serve with a wrong key: exit %d, %q, %q", code, out, errs)
	}
	cfg := server.Config{DB: db}
	cfg.SecretKey, _ = store.ParseSecretKey(key)
	cfg.Logger = quiet
	srv, err := server.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("right key: %v", err)
	}
	srv.Close()
}

// Stripe and Slack mint their own secrets: --secret-stdin takes the producer's
// secret instead of minting one, refuses one the scheme cannot sign with, and never
// echoes it.
func TestWebhookCreateWithTheProducersSecret(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	stripeSecret := "whsec_" + strings.Repeat("s", 32)
	code, out, stderr := cli(t, stripeSecret+"\n", "webhook", "create", "--db", db, "--source", "stripe",
		"--queue", "payments", "--secret-stdin")
	if code != 0 {
		t.Fatalf("create --secret-stdin: exit %d: %s", code, stderr)
	}
	if strings.Contains(out, stripeSecret) {
		t.Fatalf("the imported secret was echoed:\n%s", out)
	}
	st := openRO(t, db)
	hooks, err := st.ListWebhooks(context.Background(), store.WebhookFilter{})
	if err != nil || len(hooks) != 1 {
		t.Fatalf("webhooks: %v %v", hooks, err)
	}
	_, secrets, err := st.WebhookByToken(context.Background(), hooks[0].Token)
	st.Close()
	if err != nil || len(secrets) == 0 || secrets[0] != stripeSecret {
		t.Fatalf("stored secret %q (err %v), want the one from stdin", secrets, err)
	}
	// A standard-webhooks secret must be whsec_ + base64; a paste error is refused.
	code, _, stderr = cli(t, "whsec_not*base64!\n", "webhook", "create", "--db", db, "--source", "standard",
		"--queue", "q", "--secret-stdin")
	if code != 2 || !strings.Contains(stderr, "not a usable standard secret") {
		t.Fatalf("bad standard secret: exit %d, %q", code, stderr)
	}
	if code, _, _ := cli(t, "", "webhook", "create", "--db", db, "--source", "slack", "--queue", "q", "--secret-stdin"); code != 2 {
		t.Fatalf("empty stdin: exit %d, want 2", code)
	}
}

// webhook events lists what arrived, newest first, a page at a time, and never
// prints a sender's bytes raw to the terminal.
func TestWebhookEventsCommand(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "sb.db")
	env := map[string]string{"SWITCHBOARD_DB": db}
	s, err := store.Open(ctx, db, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var hooks []store.Webhook
	for _, src := range []string{"github", "generic"} {
		h, err := s.CreateWebhook(ctx, store.NewWebhook{SourceType: src, Queue: "inbox", Secret: "s3cret-s3cret-s3cret", CreatedBy: "human:1"})
		if err != nil {
			t.Fatal(err)
		}
		hooks = append(hooks, h)
	}
	deliver := func(h store.Webhook, id, typ string) int64 {
		r, err := s.RecordDelivery(ctx, store.NewDelivery{WebhookID: h.ID, DeliveryID: id, EventType: typ, TrustMode: "signed", Body: []byte(`{"n":1}`)})
		if err != nil {
			t.Fatal(err)
		}
		return r.EventID
	}
	first := deliver(hooks[0], "gh-1", "push")
	deliver(hooks[1], "gen-1", "")
	deliver(hooks[0], "gh-2", "issues\u202eevil")
	last := deliver(hooks[0], "gh-3", "pull_request")
	s.Close()

	code, out, errs := runCLI(t, env, "webhook", "events")
	if code != 0 {
		t.Fatalf("events: exit %d, %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 5 || !strings.HasPrefix(lines[0], "EVENT") || !strings.Contains(lines[1], "gh-3") || !strings.Contains(lines[4], "gh-1") {
		t.Fatalf("events, newest first, printed:\n%s", out)
	}
	if strings.Contains(out, "\u202e") || !strings.Contains(out, `issues\u202eevil`) {
		t.Fatalf("a bidi override in an event type reached the terminal:\n%s", out)
	}

	code, out, errs = runCLI(t, env, "webhook", "events", strconv.FormatInt(hooks[0].ID, 10), "--limit", "2", "--json")
	if code != 0 {
		t.Fatalf("events ID --json: exit %d, %s", code, errs)
	}
	var page []store.WebhookEvent
	if err := json.Unmarshal([]byte(out), &page); err != nil {
		t.Fatalf("events --json: %v\n%s", err, out)
	}
	if len(page) != 2 || page[0].ID != last || page[1].DeliveryID != "gh-2" || page[0].WebhookID != hooks[0].ID || page[0].TodoID == 0 {
		t.Fatalf("first page of webhook %d: %+v", hooks[0].ID, page)
	}
	code, out, _ = runCLI(t, env, "webhook", "events", strconv.FormatInt(hooks[0].ID, 10), "--limit", "2")
	want := fmt.Sprintf("older: --before %d", page[1].ID)
	if code != 0 || !strings.Contains(out, want) {
		t.Fatalf("a full page does not say how to get the next (%q):\n%s", want, out)
	}
	code, out, _ = runCLI(t, env, "webhook", "events", strconv.FormatInt(hooks[0].ID, 10), "--limit", "2", "--before", strconv.FormatInt(page[1].ID, 10), "--json")
	if err := json.Unmarshal([]byte(out), &page); code != 0 || err != nil || len(page) != 1 || page[0].ID != first {
		t.Fatalf("second page: exit %d, %v, %+v", code, err, page)
	}
	// A page that ends with the oldest event offers no next one.
	if _, out, _ = runCLI(t, env, "webhook", "events", strconv.FormatInt(hooks[0].ID, 10), "--limit", "3"); strings.Contains(out, "older:") {
		t.Fatalf("the last page offers an older one:\n%s", out)
	}
	if _, out, _ = runCLI(t, env, "webhook", "events", "--before", strconv.FormatInt(first, 10)); !strings.Contains(out, "no deliveries stored before event") {
		t.Fatalf("past the oldest event:\n%s", out)
	}

	if code, _, errs := runCLI(t, env, "webhook", "events", "999"); code == 0 || !strings.Contains(errs, "not found") {
		t.Fatalf("events of an unknown webhook: exit %d, %q", code, errs)
	}
	if code, _, errs := runCLI(t, env, "webhook", "events", "--limit", "0"); code != 2 || !strings.Contains(errs, "--limit") {
		t.Fatalf("events --limit 0: exit %d, %q", code, errs)
	}
}

// A delivery a webhook rule dropped made no todo, and the events table says so,
// as the board does, rather than the "-" of an event whose todo retention pruned.
func TestWebhookEventsMarksAFilteredDelivery(t *testing.T) {
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "sb.db")
	s, err := store.Open(ctx, db, store.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h, err := s.CreateWebhook(ctx, store.NewWebhook{SourceType: "github", Queue: "inbox", Secret: "s3cret-s3cret-s3cret", CreatedBy: "human:1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RecordDelivery(ctx, store.NewDelivery{WebhookID: h.ID, DeliveryID: "gh-1", EventType: "issues",
		TrustMode: "signed", Body: []byte(`{"n":1}`), Filtered: true}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	code, out, errs := runCLI(t, map[string]string{"SWITCHBOARD_DB": db}, "webhook", "events")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasSuffix(lines[1], "filtered") {
		t.Fatalf("events (exit %d, %s): the filtered delivery's TODO column does not say filtered:\n%s", code, errs, out)
	}
}
