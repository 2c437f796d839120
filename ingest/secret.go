package ingest

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"time"
)

// alnum is the alphabet of Stripe-style secrets: letters and digits survive
// copy, paste and double-click selection in every dashboard.
const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// NewSecret mints a fresh signing secret in the form producers of sourceType
// expect to be given:
//
//	standard  whsec_ + base64 of 24 random bytes (the Standard Webhooks form)
//	stripe    whsec_ + 32 random letters and digits (used as-is as the HMAC key)
//	github, slack, generic  64 hex digits (32 random bytes)
//	gitlab    48 hex digits (24 random bytes), sent back as X-Gitlab-Token
//
// It reads crypto/rand only.
func NewSecret(sourceType string) (string, error) {
	switch sourceType {
	case "standard":
		b, err := randomBytes(24)
		if err != nil {
			return "", err
		}
		return standardSecretPrefix + base64.StdEncoding.EncodeToString(b), nil
	case "stripe":
		s, err := randomAlnum(32)
		if err != nil {
			return "", err
		}
		return standardSecretPrefix + s, nil
	case "github", "slack", "generic":
		b, err := randomBytes(32)
		if err != nil {
			return "", err
		}
		return hex.EncodeToString(b), nil
	case "gitlab":
		b, err := randomBytes(24)
		if err != nil {
			return "", err
		}
		return hex.EncodeToString(b), nil
	}
	return "", fmt.Errorf("ingest: new secret %q: %w", truncate(sourceType), ErrUnknownSource)
}

// CheckSecret says whether secret, brought by whoever configures the producer
// (Stripe and Slack mint their own and accept none from outside), is one the
// scheme of sourceType can verify with: 8 to 512 characters without spaces, in the
// scheme's form (whsec_ base64 for standard). A paste error fails here, not as a
// stream of 401s later. The error never repeats the secret.
func CheckSecret(sourceType, secret string) error {
	if len(secret) < 8 || len(secret) > 512 || strings.ContainsAny(secret, " \t\r\n") {
		return fmt.Errorf("the secret must be 8-512 characters without spaces")
	}
	if _, err := Sign(sourceType, secret, "check", []byte("{}"), time.Now()); err != nil {
		return fmt.Errorf("not a usable %s secret (%w)", truncate(sourceType), err)
	}
	return nil
}

// SecretFor is the secret a webhook is created or rotated with: a fresh one
// (NewSecret) when given is nil, else given, checked (CheckSecret). minted says
// which; an error is the minting's or the check's, as given says.
func SecretFor(sourceType string, given *string) (secret string, minted bool, err error) {
	if given == nil {
		secret, err = NewSecret(sourceType)
		return secret, err == nil, err
	}
	if err := CheckSecret(sourceType, *given); err != nil {
		return "", false, err
	}
	return *given, false, nil
}

// Minter is a producer that mints its own signing secrets and accepts none from
// outside: a secret Switchboard mints for its source type verifies only the
// deliveries someone signs by hand (test tools).
type Minter struct {
	Name    string // the producer
	Account string // what of the producer's is configured with the webhook
	Where   string // where its ingest URL is pasted
}

// Minters are the source types whose producers mint their own secrets.
var Minters = map[string]Minter{
	"stripe": {"Stripe", "Stripe account", "Stripe (Developers → Webhooks)"},
	"slack":  {"Slack", "Slack app", "the app's Event Subscriptions as its Request URL"},
}

func randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("ingest: new secret: %w", err)
	}
	return b, nil
}

// randomAlnum draws n characters uniformly from alnum by rejection sampling:
// bytes at or above 248 (= 4*62) are discarded so that b%62 has no bias.
func randomAlnum(n int) (string, error) {
	out := make([]byte, 0, n)
	buf := make([]byte, n+n/4)
	for len(out) < n {
		if _, err := rand.Read(buf); err != nil {
			return "", fmt.Errorf("ingest: new secret: %w", err)
		}
		for _, b := range buf {
			if b >= 248 {
				continue
			}
			out = append(out, alnum[b%62])
			if len(out) == n {
				break
			}
		}
	}
	return string(out), nil
}
