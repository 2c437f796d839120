// Package ingest turns provider webhook deliveries into verified events.
//
// The verifiers in this package are pure functions: they read the request's
// headers and raw body and the webhook's candidate secrets, and answer whether
// the provider really signed those bytes. They must never touch the store or
// the network, never log, and never put a secret, signature or body into an
// error message: errors name the scheme and what was wrong, nothing more.
package ingest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/internal/textcut"
)

// verifiers are the signature schemes, one per webhook source type: the types
// are the store's (store.SourceTypes), and a test holds this table to them.
// Verify looks only here, so nothing outside this package can widen what it
// accepts.
var verifiers = map[string]func(secrets []string, h http.Header, body []byte, now time.Time) (Delivery, error){
	"github":   func(s []string, h http.Header, b []byte, _ time.Time) (Delivery, error) { return verifyGitHub(s, h, b) },
	"stripe":   verifyStripe,
	"slack":    verifySlack,
	"standard": verifyStandard,
	"gitlab":   func(s []string, h http.Header, _ []byte, _ time.Time) (Delivery, error) { return verifyGitLab(s, h) },
	"generic": func(s []string, h http.Header, b []byte, _ time.Time) (Delivery, error) {
		return verifyGeneric(s, h, b)
	},
}

// Trust modes recorded on every verified delivery.
const (
	TrustSigned = "signed" // the provider signed the body with an HMAC
	TrustToken  = "token"  // the provider presented a shared token (gitlab)
)

// Tolerance is how far a signed timestamp may lie from our clock, in either
// direction. Providers' own libraries accept any future timestamp; we do not,
// because a future-dated signature is a replay that never goes stale.
const Tolerance = 300 * time.Second

// maxSignatures bounds how many signature entries of one header are checked,
// so a header stuffed with thousands of entries costs no more than a few
// HMAC compares. Providers send one, or two during a secret roll.
const maxSignatures = 16

// maxField bounds a delivery id, event type or challenge taken from a request:
// they end up in the store and in logs, and no provider sends longer ones.
const maxField = 256

// Sentinel errors. Verify wraps them with the scheme and the reason
// (fmt.Errorf("ingest: verify stripe: ...: %w", ErrBadSignature)); callers test
// them with errors.Is and answer 401 (or 400 for ErrMalformed if they choose).
var (
	// ErrUnknownSource: the source type is not one of store.SourceTypes.
	ErrUnknownSource = errors.New("unknown webhook source type")
	// ErrMissingSignature: the request carries no signature (or token) of a
	// kind this scheme accepts.
	ErrMissingSignature = errors.New("missing webhook signature")
	// ErrBadSignature: a signature is present but no candidate secret produced it.
	ErrBadSignature = errors.New("webhook signature does not match")
	// ErrTimestamp: the signature is valid but its timestamp is more than
	// Tolerance away from now (stale or future-dated).
	ErrTimestamp = errors.New("webhook timestamp outside tolerance")
	// ErrMalformed: a header the scheme needs is unparseable, or a signed
	// request carries an unusable delivery id, event type or challenge.
	ErrMalformed = errors.New("malformed webhook request")
	// ErrUnusable: the request is signed with a secret of this webhook, but its
	// delivery id, event type or challenge cannot be kept (too long, not UTF-8, a
	// control character). Such errors also match ErrMalformed. The sender proved
	// the secret, so this is a 400, not a failed verification.
	ErrUnusable = errors.New("signed webhook request with an unusable field")
	// ErrNoSecret: none of the candidate secrets is usable for the scheme
	// (all empty, or a standard secret that is not base64). This is a
	// configuration fault on our side; the delivery must still be refused.
	ErrNoSecret = errors.New("no usable webhook secret")
)

// Delivery is what a verified request tells us.
type Delivery struct {
	// ID is the provider's delivery id, the idempotency key; "" when the
	// provider gives none.
	ID string
	// ReplayKey is set where ID is not signed (github, generic) or absent (a
	// Stripe body without "id", a Slack body without event_id): the hash of the
	// signed bytes, which no replayer can change. A delivery matching a kept
	// event on ID or on ReplayKey is a redelivery of it. Zero when ID alone is
	// the key (an array, not a slice, so that a Delivery compares with ==).
	ReplayKey [sha256.Size]byte
	// EventType is the provider's event type when known (X-GitHub-Event,
	// the Stripe body's "type", Slack's event.type or "url_verification", …).
	EventType string
	// TrustMode is TrustSigned or TrustToken.
	TrustMode string
	// Challenge is set only for a validly signed Slack url_verification
	// request: the value the receiver must echo back.
	Challenge string
	// Secret is the index in the candidate list of the secret that matched:
	// 0 for the current one, 1 for the previous one during a rotation. A
	// receiver can count deliveries still signed with an old secret.
	Secret int
}

// Verify checks a delivery's signature over the raw body against each
// candidate secret (current first, then a previous one still inside its
// rotation grace period), comparing in constant time, and enforces Tolerance
// in both directions for the schemes that sign a timestamp. The signature is
// checked before the timestamp, so ErrTimestamp only ever describes a request
// that a holder of the secret really signed (a clock or replay problem, not a
// forgery). Verify never panics, whatever the headers hold.
func Verify(sourceType string, secrets []string, h http.Header, body []byte, now time.Time) (Delivery, error) {
	verify, ok := verifiers[sourceType]
	if !ok {
		return Delivery{}, fmt.Errorf("ingest: verify %q: %w", truncate(sourceType), ErrUnknownSource)
	}
	d, err := verify(secrets, h, body, now)
	if err != nil {
		return Delivery{}, fmt.Errorf("ingest: verify %s: %w", sourceType, err)
	}
	return d, nil
}

// Sign produces the headers a producer of sourceType sends for body, signed
// with secret at time now. id is the delivery id for the schemes that carry
// one in a header (github, standard, gitlab, generic); stripe and slack carry
// theirs in the body and ignore it. It exists for tests, benchmarks and tools
// that play a producer (a "send a test delivery" button); the receiver never
// calls it.
func Sign(sourceType, secret, id string, body []byte, now time.Time) (http.Header, error) {
	if secret == "" {
		return nil, fmt.Errorf("ingest: sign %q: %w", truncate(sourceType), ErrNoSecret)
	}
	h := http.Header{}
	var err error
	switch sourceType {
	case "github":
		signGitHub(h, secret, id, body)
	case "stripe":
		signStripe(h, secret, body, now)
	case "slack":
		signSlack(h, secret, body, now)
	case "standard":
		err = signStandard(h, secret, id, body, now)
	case "gitlab":
		signGitLab(h, secret, id)
	case "generic":
		signGeneric(h, secret, id, body)
	default:
		err = ErrUnknownSource
	}
	if err != nil {
		return nil, fmt.Errorf("ingest: sign %q: %w", truncate(sourceType), err)
	}
	return h, nil
}

// macSHA256 is HMAC-SHA256 of the concatenated parts, so signed contents
// like "t.body" are never copied into one buffer.
func macSHA256(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// matchSecret returns the index of the first candidate key whose MAC equals
// one of sigs, or -1. keys[i] nil means candidate i is unusable. Every
// comparison is constant-time in the signature bytes; which secret matched is
// not secret.
func matchSecret(keys [][]byte, sigs [][]byte, mac func(key []byte) []byte) int {
	for i, k := range keys {
		if k == nil {
			continue
		}
		want := mac(k)
		for _, s := range sigs {
			if hmac.Equal(want, s) {
				return i
			}
		}
	}
	return -1
}

// replayKey is the SHA-256 of the signed bytes, given in the parts the MAC took.
// A plain hash, not the signature: the store keeps it beside the body, and a kept
// signature with its body would be a delivery anyone reading a backup could send.
func replayKey(parts ...[]byte) (k [sha256.Size]byte) {
	h := sha256.New()
	for _, p := range parts {
		h.Write(p)
	}
	copy(k[:], h.Sum(nil))
	return k
}

// replayKeyBytes is ReplayKey as the store takes it: nil when there is none.
func (d Delivery) replayKeyBytes() []byte {
	if d.ReplayKey == ([sha256.Size]byte{}) {
		return nil
	}
	return d.ReplayKey[:]
}

// rawKeys turns candidate secrets into HMAC keys, dropping empty ones: an
// empty key is one anybody can sign with.
func rawKeys(secrets []string) ([][]byte, error) {
	keys := make([][]byte, len(secrets))
	usable := false
	for i, s := range secrets {
		if s != "" {
			keys[i] = []byte(s)
			usable = true
		}
	}
	if !usable {
		return nil, ErrNoSecret
	}
	return keys, nil
}

// parseUnix parses a provider's decimal Unix-seconds timestamp. Only plain
// ASCII digits are accepted (no sign, no spaces, no fraction), at most 12 of
// them, so the value is never negative and arithmetic on it cannot overflow.
func parseUnix(s string) (int64, error) {
	if s == "" || len(s) > 12 {
		return 0, fmt.Errorf("timestamp of %d bytes: %w", len(s), ErrMalformed)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("timestamp is not decimal seconds: %w", ErrMalformed)
		}
	}
	ts, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("timestamp: %w", ErrMalformed)
	}
	return ts, nil
}

// checkTimestamp enforces |now - ts| <= Tolerance, whole seconds, both ways.
func checkTimestamp(ts int64, now time.Time) error {
	diff := now.Unix() - ts // ts is in [0, 10^12), so this cannot overflow
	limit := int64(Tolerance / time.Second)
	if diff > limit {
		return fmt.Errorf("timestamp %ds in the past: %w", diff, ErrTimestamp)
	}
	if diff < -limit {
		return fmt.Errorf("timestamp %ds in the future: %w", -diff, ErrTimestamp)
	}
	return nil
}

// field validates a value taken from a request (delivery id, event type,
// challenge) before it reaches the store and logs: trimmed, at most maxField
// bytes, valid UTF-8, no control characters. what names it in the error.
func field(what, s string) (string, error) {
	s = strings.TrimSpace(s)
	if len(s) > maxField {
		return "", fmt.Errorf("%s of %d bytes (at most %d): %w: %w", what, len(s), maxField, ErrUnusable, ErrMalformed)
	}
	if !utf8.ValidString(s) {
		return "", fmt.Errorf("%s is not UTF-8: %w: %w", what, ErrUnusable, ErrMalformed)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f {
			return "", fmt.Errorf("%s has a control character: %w: %w", what, ErrUnusable, ErrMalformed)
		}
	}
	return s, nil
}

// verified is the Delivery a verifier returns once secret (an index into the
// candidates) matched: id and eventType are validated with field.
func verified(trust string, secret int, id, eventType string) (Delivery, error) {
	d := Delivery{TrustMode: trust, Secret: secret}
	var err error
	if d.ID, err = field("delivery id", id); err != nil {
		return Delivery{}, err
	}
	if d.EventType, err = field("event type", eventType); err != nil {
		return Delivery{}, err
	}
	return d, nil
}

// hexSig decodes a hex-encoded HMAC-SHA256 (exactly 64 hex digits, either
// case). A value of any other shape cannot match, so it is reported as absent.
func hexSig(s string) ([]byte, bool) {
	if len(s) != 2*sha256.Size {
		return nil, false
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, false
	}
	return b, true
}

// truncate keeps an attacker- or caller-supplied name short in an error: 32
// bytes and the ellipsis.
func truncate(s string) string { return textcut.Bytes(s, 32+len(textcut.Ellipsis)) }
