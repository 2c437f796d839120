package ingest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

// The generic scheme is GitHub's HMAC-SHA256-hex-of-the-body, so GitHub's
// published vector applies to it, with and without the "sha256=" prefix.
func TestVerifyGeneric(t *testing.T) {
	bare := githubDocSig[len("sha256="):]
	key := sha256.Sum256([]byte(githubDocBody)) // the delivery id is not signed: the body is the replay key
	cases := []struct {
		name    string
		secrets []string
		sig     string
		id      string
		event   string
		body    string
		want    error
		wantD   Delivery
	}{
		{"published vector, prefixed", []string{githubDocSecret}, githubDocSig, "d-1", "order.paid", githubDocBody, nil,
			Delivery{ID: "d-1", ReplayKey: key, EventType: "order.paid", TrustMode: TrustSigned}},
		{"published vector, bare hex", []string{githubDocSecret}, bare, "", "", githubDocBody, nil,
			Delivery{ReplayKey: key, TrustMode: TrustSigned}},
		{"previous secret", []string{"new-secret", githubDocSecret}, bare, "d-2", "", githubDocBody, nil,
			Delivery{ID: "d-2", ReplayKey: key, TrustMode: TrustSigned, Secret: 1}},
		{"wrong secret", []string{"new-secret"}, bare, "", "", githubDocBody, ErrBadSignature, Delivery{}},
		{"tampered body", []string{githubDocSecret}, bare, "", "", "Hello, World", ErrBadSignature, Delivery{}},
		{"truncated", []string{githubDocSecret}, bare[:63], "", "", githubDocBody, ErrMalformed, Delivery{}},
		{"other prefix", []string{githubDocSecret}, "sha512=" + bare, "", "", githubDocBody, ErrMalformed, Delivery{}},
		{"missing", []string{githubDocSecret}, "", "", "", githubDocBody, ErrMissingSignature, Delivery{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := hdr("X-Signature-256", c.sig, "X-Delivery-Id", c.id, "X-Event-Type", c.event)
			d, err := Verify("generic", c.secrets, h, []byte(c.body), time.Now())
			checkVerify(t, d, err, c.want, c.wantD)
		})
	}
}

func FuzzParseGenericSignature(f *testing.F) {
	bare := githubDocSig[len("sha256="):]
	for _, s := range []string{githubDocSig, bare, "", "sha256=", "sha256=sha256=" + bare, bare + " "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		sig, err := parseGenericSignature(v)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error wraps no ErrMalformed: %v", err)
			}
			return
		}
		trimmed := strings.TrimPrefix(strings.TrimSpace(v), "sha256=")
		if len(sig) != 32 || !strings.EqualFold(trimmed, hex.EncodeToString(sig)) {
			t.Fatalf("accepted %q as %x", v, sig)
		}
	})
}
