package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func testKey(t testing.TB) []byte {
	t.Helper()
	k := make([]byte, SecretKeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

func TestParseSecretKey(t *testing.T) {
	key := bytes.Repeat([]byte{0xfb}, 32) // 0xfb makes '+' '/' vs '-' '_' differ between alphabets
	cases := []struct {
		name string
		in   string
		ok   bool
	}{
		{"hex", hex.EncodeToString(key), true},
		{"hex upper with newline", strings.ToUpper(hex.EncodeToString(key)) + "\n", true},
		{"base64", base64.StdEncoding.EncodeToString(key), true},
		{"base64 raw", base64.RawStdEncoding.EncodeToString(key), true},
		{"base64url", base64.URLEncoding.EncodeToString(key), true},
		{"base64url raw", base64.RawURLEncoding.EncodeToString(key), true},
		{"empty", "  \n", false},
		{"16 bytes", base64.StdEncoding.EncodeToString(key[:16]), false},
		{"33 bytes hex", hex.EncodeToString(append(key, 1)), false},
		{"not an encoding", "correct horse battery staple!!", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ParseSecretKey(c.in)
			if c.ok {
				if err != nil || !bytes.Equal(got, key) {
					t.Fatalf("ParseSecretKey = %x, %v; want the key", got, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ParseSecretKey(%q) accepted %d bytes", c.in, len(got))
			}
		})
	}
}

func TestSecretBox(t *testing.T) {
	box, err := NewSecretBox(testKey(t))
	if err != nil {
		t.Fatal(err)
	}
	other, _ := NewSecretBox(testKey(t))
	const secret = "whsec_c2VjcmV0IHNlY3JldCBzZWNyZXQ="
	sealed, err := box.Seal(secret, "webhook:1")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sealed, "enc:v1:") || strings.Contains(sealed, secret) {
		t.Fatalf("sealed form %q", sealed)
	}
	again, _ := box.Seal(secret, "webhook:1")
	if again == sealed {
		t.Fatal("two seals of the same secret are equal: the nonce is not random")
	}
	if got, err := box.Open(sealed, "webhook:1"); err != nil || got != secret {
		t.Fatalf("round trip: %q, %v", got, err)
	}

	raw, _ := base64.StdEncoding.DecodeString(sealed[len("enc:v1:"):])
	raw[len(raw)-1] ^= 1
	tampered := "enc:v1:" + base64.StdEncoding.EncodeToString(raw)

	var nilBox *SecretBox
	fails := []struct {
		name   string
		box    *SecretBox
		stored string
		ad     string
	}{
		{"tampered", box, tampered, "webhook:1"},
		{"other row", box, sealed, "webhook:2"},
		{"other key", other, sealed, "webhook:1"},
		{"no key", nilBox, sealed, "webhook:1"},
		{"truncated", box, sealed[:20], "webhook:1"},
		{"not base64", box, "enc:v1:***", "webhook:1"},
	}
	for _, f := range fails {
		if got, err := f.box.Open(f.stored, f.ad); !errors.Is(err, ErrSecretKey) {
			t.Errorf("%s: Open = %q, %v; want ErrSecretKey", f.name, got, err)
		} else if strings.Contains(err.Error(), secret) {
			t.Errorf("%s: error text carries the secret", f.name)
		}
	}

	// Legacy plaintext passes through with or without a key; no key stores plaintext.
	for _, b := range []*SecretBox{box, nilBox} {
		if got, err := b.Open("plain-secret", "webhook:9"); err != nil || got != "plain-secret" {
			t.Fatalf("legacy plaintext: %q, %v", got, err)
		}
	}
	if got, _ := nilBox.Seal("plain-secret", "webhook:9"); got != "plain-secret" {
		t.Fatalf("no key: Seal = %q, want plaintext", got)
	}
}

// rawSecrets reads a webhook's stored secret columns straight from the file.
func rawSecrets(t *testing.T, s *Store, id int64) (cur string, prev sql.NullString) {
	t.Helper()
	if err := s.rdb.QueryRow(s.q(`SELECT signing_secret, previous_secret FROM webhooks WHERE id = ?`), id).Scan(&cur, &prev); err != nil {
		t.Fatal(err)
	}
	return cur, prev
}

// foreignExec runs SQL on the file through a separate connection, as an attacker
// with only the database (or a careless operator) would.
func foreignExec(t *testing.T, path, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(query, args...); err != nil {
		t.Fatal(err)
	}
}

func TestSecretsSealedAtRest(t *testing.T) {
	ctx := context.Background()
	key := testKey(t)
	s := openTest(t, Options{SecretKey: key})
	h := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "s3cret-one", CreatedBy: "human:1"})
	if !h.SecretEncrypted {
		t.Fatal("webhook created with a key does not report its secret encrypted")
	}
	cur, _ := rawSecrets(t, s, h.ID)
	if !Sealed(cur) || strings.Contains(cur, "s3cret-one") {
		t.Fatalf("stored secret %q is not sealed", cur)
	}
	if _, err := s.RotateWebhook(ctx, h.ID, 0, "s3cret-two", time.Hour, "human:1"); err != nil {
		t.Fatal(err)
	}
	cur, prev := rawSecrets(t, s, h.ID)
	if !Sealed(cur) || !Sealed(prev.String) {
		t.Fatalf("after rotation: current %q previous %q; want both sealed", cur, prev.String)
	}
	_, secrets, err := s.WebhookByToken(ctx, h.Token)
	if err != nil || len(secrets) != 2 || secrets[0] != "s3cret-two" || secrets[1] != "s3cret-one" {
		t.Fatalf("WebhookByToken secrets = %q, %v", secrets, err)
	}
}

func TestSwappedSealedSecretsDoNotOpen(t *testing.T) {
	ctx := context.Background()
	key := testKey(t)
	path := filepath.Join(t.TempDir(), "sb.db")
	s, err := Open(ctx, path, Options{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	a := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "secret-a", CreatedBy: "human:1"})
	b := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "secret-b", CreatedBy: "human:1"})
	s.Close()

	// Copy a's ciphertext into b: with the row id as additional data it must not open.
	foreignExec(t, path, `UPDATE webhooks SET signing_secret = (SELECT signing_secret FROM webhooks WHERE id = ?) WHERE id = ?`, a.ID, b.ID)

	_, err = Open(ctx, path, Options{SecretKey: key})
	if !errors.Is(err, ErrSecretKey) {
		t.Fatalf("Open with a moved ciphertext = %v, want ErrSecretKey", err)
	}
	// Without a key the store opens (the CLI's todo commands need no key), but the
	// check that serve runs refuses, and the moved secret never verifies anything.
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckSecrets(ctx); !errors.Is(err, ErrSecretKey) {
		t.Fatalf("CheckSecrets without a key = %v, want ErrSecretKey", err)
	}
	if _, _, err := s.WebhookByToken(ctx, b.Token); !errors.Is(err, ErrSecretKey) {
		t.Fatalf("WebhookByToken = %v, want ErrSecretKey", err)
	}
}

func TestWrongKeyRefusedAtOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sb.db")
	s, err := Open(ctx, path, Options{SecretKey: testKey(t)})
	if err != nil {
		t.Fatal(err)
	}
	mustWebhook(t, s, NewWebhook{SourceType: "stripe", Queue: "inbox", Secret: "whsec_x", CreatedBy: "human:1"})
	s.Close()
	for _, opts := range []Options{{SecretKey: testKey(t)}, {SecretKey: testKey(t), ReadOnly: true}} {
		_, err = Open(ctx, path, opts)
		if !errors.Is(err, ErrSecretKey) || !strings.Contains(err.Error(), "does not open 1 of the 1") {
			t.Fatalf("Open with another key (read-only %v) = %v, want a clear ErrSecretKey", opts.ReadOnly, err)
		}
	}
}

func TestLegacyPlaintextAndReencrypt(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sb.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	h := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "legacy-one", CreatedBy: "human:1"})
	if _, err := s.RotateWebhook(ctx, h.ID, 0, "legacy-two", time.Hour, "human:1"); err != nil {
		t.Fatal(err)
	}
	gone := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "deleted", CreatedBy: "human:1"})
	if err := s.DeleteWebhook(ctx, gone.ID, 0, "human:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReencryptSecrets(ctx, "human:cli"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ReencryptSecrets without a key = %v, want ErrInvalid", err)
	}
	s.Close()

	key := testKey(t)
	s, err = Open(ctx, path, Options{SecretKey: key})
	if err != nil {
		t.Fatalf("a key must not strand plaintext rows: %v", err)
	}
	if _, secrets, err := s.WebhookByToken(ctx, h.Token); err != nil || len(secrets) != 2 || secrets[0] != "legacy-two" {
		t.Fatalf("legacy plaintext read: %q, %v", secrets, err)
	}
	n, err := s.ReencryptSecrets(ctx, "human:cli")
	if err != nil || n != 2 {
		t.Fatalf("ReencryptSecrets = %d, %v; want 2 (current and previous)", n, err)
	}
	cur, prev := rawSecrets(t, s, h.ID)
	if !Sealed(cur) || !Sealed(prev.String) {
		t.Fatalf("after re-encrypt: %q / %q", cur, prev.String)
	}
	if n, err := s.ReencryptSecrets(ctx, "human:cli"); err != nil || n != 0 {
		t.Fatalf("second ReencryptSecrets = %d, %v; want 0", n, err)
	}
	if _, secrets, err := s.WebhookByToken(ctx, h.Token); err != nil || secrets[0] != "legacy-two" || secrets[1] != "legacy-one" {
		t.Fatalf("after re-encrypt: %q, %v", secrets, err)
	}
	audit, _ := s.ListAudit(ctx, AuditFilter{Action: "secrets.reencrypt"})
	if len(audit) != 1 || audit[0].Detail != "sealed=2" {
		t.Fatalf("audit = %+v", audit)
	}
	s.Close()

	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.CheckSecrets(ctx); !errors.Is(err, ErrSecretKey) || !strings.Contains(err.Error(), "no secret encryption key") {
		t.Fatalf("CheckSecrets without the key = %v", err)
	}
}

// Rotating the encryption key: serve runs with the new key and the old one as
// previous (every secret still opens), reencrypt reseals what the old key sealed,
// and from then on the new key alone opens everything.
func TestSecretKeyRotation(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sb.db")
	oldKey, newKey := testKey(t), testKey(t)
	s, err := Open(ctx, path, Options{SecretKey: oldKey})
	if err != nil {
		t.Fatal(err)
	}
	h := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "first", CreatedBy: "human:1"})
	if _, err := s.RotateWebhook(ctx, h.ID, 0, "second", time.Hour, "human:1"); err != nil {
		t.Fatal(err)
	}
	s.Close()

	if _, err := Open(ctx, path, Options{SecretKey: newKey}); !errors.Is(err, ErrSecretKey) {
		t.Fatalf("the new key alone before reencrypt: %v, want ErrSecretKey", err)
	}
	if _, err := Open(ctx, path, Options{PreviousSecretKeys: [][]byte{oldKey}}); !errors.Is(err, ErrSecretKey) {
		t.Fatalf("a previous key without a current one: %v, want ErrSecretKey", err)
	}
	s, err = Open(ctx, path, Options{SecretKey: newKey, PreviousSecretKeys: [][]byte{oldKey}})
	if err != nil {
		t.Fatalf("new key with the old as previous: %v", err)
	}
	if _, secrets, err := s.WebhookByToken(ctx, h.Token); err != nil || len(secrets) != 2 || secrets[0] != "second" {
		t.Fatalf("secrets during the rotation: %q, %v", secrets, err)
	}
	// A webhook created mid-rotation is sealed with the new key already.
	h2 := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "fresh", CreatedBy: "human:1"})
	if n, err := s.ReencryptSecrets(ctx, "human:cli"); err != nil || n != 2 {
		t.Fatalf("ReencryptSecrets = %d, %v; want 2 (the old key's current and previous)", n, err)
	}
	if n, err := s.ReencryptSecrets(ctx, "human:cli"); err != nil || n != 0 {
		t.Fatalf("second ReencryptSecrets = %d, %v; want 0", n, err)
	}
	s.Close()

	s, err = Open(ctx, path, Options{SecretKey: newKey})
	if err != nil {
		t.Fatalf("the new key alone after reencrypt: %v", err)
	}
	defer s.Close()
	for _, c := range []struct {
		token string
		want  []string
	}{{h.Token, []string{"second", "first"}}, {h2.Token, []string{"fresh"}}} {
		if _, secrets, err := s.WebhookByToken(ctx, c.token); err != nil || strings.Join(secrets, ",") != strings.Join(c.want, ",") {
			t.Fatalf("after rotation: %q, %v; want %q", secrets, err, c.want)
		}
	}
}

// A process without the key (the CLI outside the service) must not slip a plaintext
// secret in beside sealed ones; with no sealed secrets, no key means plaintext.
func TestNoPlaintextBesideSealedSecrets(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sb.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	plain := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "plain-one", CreatedBy: "human:1"})
	s.Close()

	key := testKey(t)
	s, err = Open(ctx, path, Options{SecretKey: key})
	if err != nil {
		t.Fatal(err)
	}
	sealed := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "sealed-one", CreatedBy: "human:1"})
	s.Close()

	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	before, err := s.ListWebhooks(ctx, WebhookFilter{IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateWebhook(ctx, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "would-be-plain", CreatedBy: "human:1"})
	if !errors.Is(err, ErrSecretKey) || !strings.Contains(err.Error(), "stored as plaintext") {
		t.Fatalf("create without the key beside sealed secrets = %v, want a clear ErrSecretKey", err)
	}
	for _, id := range []int64{plain.ID, sealed.ID} {
		if _, err := s.RotateWebhook(ctx, id, 0, "would-be-plain", 0, "human:1"); !errors.Is(err, ErrSecretKey) {
			t.Fatalf("rotate webhook %d without the key = %v, want ErrSecretKey", id, err)
		}
	}
	after, err := s.ListWebhooks(ctx, WebhookFilter{IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("%d webhooks after the refused create, want %d", len(after), len(before))
	}
	for i := range after {
		if after[i].RotatedAt != nil {
			t.Fatalf("webhook %d was rotated by a refused call", after[i].ID)
		}
	}
}

// Once a key has been used with a database, a process without it may not store a
// plaintext secret there even before the first secret is sealed, and a keyless
// serve is refused at start (its check) rather than refuse every webhook later.
func TestKeyedDatabaseRefusesPlaintextFromTheStart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sb.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if keyed, err := s.Keyed(ctx); err != nil || keyed {
		t.Fatalf("a database never given a key: keyed %v (%v)", keyed, err)
	}
	s.Close()
	s, err = Open(ctx, path, Options{SecretKey: testKey(t)}) // serve's first start, no webhooks yet
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if keyed, err := s.Keyed(ctx); err != nil || !keyed {
		t.Fatalf("after a keyed open: keyed %v (%v)", keyed, err)
	}
	_, err = s.CreateWebhook(ctx, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "would-be-plain", CreatedBy: "human:1"})
	if !errors.Is(err, ErrSecretKey) || !strings.Contains(err.Error(), "stored as plaintext") {
		t.Fatalf("keyless create on a keyed database = %v, want a clear ErrSecretKey", err)
	}
	if err := s.CheckSecrets(ctx); !errors.Is(err, ErrSecretKey) || !strings.Contains(err.Error(), "set up with a secret encryption key") {
		t.Fatalf("CheckSecrets without the key on a keyed database = %v", err)
	}
	if list, err := s.ListWebhooks(ctx, WebhookFilter{IncludeDeleted: true}); err != nil || len(list) != 0 {
		t.Fatalf("webhooks after the refusal: %d (%v)", len(list), err)
	}
}
