package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

// GitHub's published test values ("Testing the webhook payload validation",
// docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
const (
	githubDocSecret = "It's a Secret to Everybody"
	githubDocBody   = "Hello, World!"
	githubDocSig    = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

func TestSignGitHubMatchesPublishedVector(t *testing.T) {
	h, err := Sign("github", githubDocSecret, "", []byte(githubDocBody), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get("X-Hub-Signature-256"); got != githubDocSig {
		t.Fatalf("signature %s, want GitHub's %s", got, githubDocSig)
	}
}

func TestVerifyGitHub(t *testing.T) {
	const guid = "72d3162e-cc78-11e3-81ab-4c9367dc0958"
	other := strings.Repeat("ab", 32)
	key := sha256.Sum256([]byte(githubDocBody)) // the delivery id is not signed: the body is the replay key
	cases := []struct {
		name    string
		secrets []string
		sig     string
		body    string
		want    error
		wantD   Delivery
	}{
		{"published vector", []string{githubDocSecret}, githubDocSig, githubDocBody, nil,
			Delivery{ID: guid, ReplayKey: key, EventType: "push", TrustMode: TrustSigned}},
		{"previous secret during rotation", []string{other, githubDocSecret}, githubDocSig, githubDocBody, nil,
			Delivery{ID: guid, ReplayKey: key, EventType: "push", TrustMode: TrustSigned, Secret: 1}},
		{"upper-case hex", []string{githubDocSecret}, "sha256=" + strings.ToUpper(githubDocSig[7:]), githubDocBody, nil,
			Delivery{ID: guid, ReplayKey: key, EventType: "push", TrustMode: TrustSigned}},
		{"surrounding spaces", []string{githubDocSecret}, " " + githubDocSig + " ", githubDocBody, nil,
			Delivery{ID: guid, ReplayKey: key, EventType: "push", TrustMode: TrustSigned}},
		{"wrong secret", []string{other}, githubDocSig, githubDocBody, ErrBadSignature, Delivery{}},
		{"tampered body", []string{githubDocSecret}, githubDocSig, "Hello, World?", ErrBadSignature, Delivery{}},
		{"empty body", []string{githubDocSecret}, githubDocSig, "", ErrBadSignature, Delivery{}},
		{"truncated header", []string{githubDocSecret}, githubDocSig[:len(githubDocSig)-2], githubDocBody, ErrMalformed, Delivery{}},
		{"prefix only", []string{githubDocSecret}, "sha256=", githubDocBody, ErrMalformed, Delivery{}},
		{"sha1 scheme", []string{githubDocSecret}, "sha1=" + githubDocSig[7:], githubDocBody, ErrMalformed, Delivery{}},
		{"no prefix", []string{githubDocSecret}, githubDocSig[7:], githubDocBody, ErrMalformed, Delivery{}},
		{"not hex", []string{githubDocSecret}, "sha256=" + strings.Repeat("zz", 32), githubDocBody, ErrMalformed, Delivery{}},
		{"two signatures in one value", []string{githubDocSecret}, githubDocSig + "," + githubDocSig, githubDocBody, ErrMalformed, Delivery{}},
		{"missing", []string{githubDocSecret}, "", githubDocBody, ErrMissingSignature, Delivery{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := hdr("X-Hub-Signature-256", c.sig, "X-GitHub-Delivery", guid, "X-GitHub-Event", "push")
			d, err := Verify("github", c.secrets, h, []byte(c.body), time.Now())
			checkVerify(t, d, err, c.want, c.wantD)
		})
	}
}

// Only the SHA-256 header counts: a request carrying just the legacy SHA-1
// X-Hub-Signature has no signature we accept.
func TestVerifyGitHubIgnoresSHA1Header(t *testing.T) {
	h := hdr("X-Hub-Signature", "sha1=0123456789abcdef0123456789abcdef01234567")
	_, err := Verify("github", []string{githubDocSecret}, h, []byte(githubDocBody), time.Now())
	if !errors.Is(err, ErrMissingSignature) {
		t.Fatalf("err = %v, want ErrMissingSignature", err)
	}
}

func FuzzParseGitHubSignature(f *testing.F) {
	for _, s := range []string{githubDocSig, "", "sha256=", "sha1=abc", githubDocSig + "00", " " + githubDocSig, "sha256=" + strings.Repeat("g", 64)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		sig, err := parseGitHubSignature(v)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error wraps no ErrMalformed: %v", err)
			}
			return
		}
		if len(sig) != 32 {
			t.Fatalf("accepted %q as a %d-byte signature", v, len(sig))
		}
		if !strings.EqualFold(strings.TrimSpace(v), "sha256="+hex.EncodeToString(sig)) {
			t.Fatalf("accepted %q, which does not spell %x", v, sig)
		}
	})
}
