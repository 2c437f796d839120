package ingest

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// GitHub signs the raw body with HMAC-SHA256 keyed by the webhook secret and
// sends it as X-Hub-Signature-256: sha256=<hex>. It signs no timestamp, so
// there is no tolerance to enforce. X-GitHub-Delivery (a GUID) is not signed
// either, so whoever captured a body and its signature could send them again
// under any id, or none: the hash of the body is a second idempotency key, kept
// as long as the event is. The legacy SHA-1 X-Hub-Signature is ignored.
const (
	githubSignatureHeader = "X-Hub-Signature-256"
	githubDeliveryHeader  = "X-GitHub-Delivery"
	githubEventHeader     = "X-GitHub-Event"
	githubPrefix          = "sha256="
)

// bodyMAC is a scheme that signs the raw body alone, HMAC-SHA256 in hex, in one
// header: GitHub's, and the generic one modelled on it. They differ only in their
// header names and in how strictly parse reads the signature header.
type bodyMAC struct {
	signatureHeader, deliveryHeader, eventHeader string
	parse                                        func(v string) ([]byte, error)
}

func githubMAC() bodyMAC {
	return bodyMAC{githubSignatureHeader, githubDeliveryHeader, githubEventHeader, parseGitHubSignature}
}

func verifyGitHub(secrets []string, h http.Header, body []byte) (Delivery, error) {
	return githubMAC().verify(secrets, h, body)
}

func (s bodyMAC) verify(secrets []string, h http.Header, body []byte) (Delivery, error) {
	v := h.Get(s.signatureHeader)
	if v == "" {
		return Delivery{}, fmt.Errorf("no %s header: %w", s.signatureHeader, ErrMissingSignature)
	}
	sig, err := s.parse(v)
	if err != nil {
		return Delivery{}, err
	}
	keys, err := rawKeys(secrets)
	if err != nil {
		return Delivery{}, err
	}
	i := matchSecret(keys, [][]byte{sig}, func(k []byte) []byte { return macSHA256(k, body) })
	if i < 0 {
		return Delivery{}, fmt.Errorf("%s: %w", s.signatureHeader, ErrBadSignature)
	}
	d, err := verified(TrustSigned, i, h.Get(s.deliveryHeader), h.Get(s.eventHeader))
	if err != nil {
		return Delivery{}, err
	}
	d.ReplayKey = replayKey(body)
	return d, nil
}

// parseGitHubSignature reads "sha256=<64 hex>"; surrounding spaces are
// tolerated, anything else is malformed.
func parseGitHubSignature(v string) ([]byte, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(v), githubPrefix)
	if !ok {
		return nil, fmt.Errorf("%s lacks the %q prefix: %w", githubSignatureHeader, githubPrefix, ErrMalformed)
	}
	sig, ok := hexSig(rest)
	if !ok {
		return nil, fmt.Errorf("%s is not 64 hex digits: %w", githubSignatureHeader, ErrMalformed)
	}
	return sig, nil
}

func signGitHub(h http.Header, secret, id string, body []byte) {
	githubMAC().sign(h, secret, id, body)
}

// sign writes the signature both schemes accept: with GitHub's "sha256=" prefix.
func (s bodyMAC) sign(h http.Header, secret, id string, body []byte) {
	h.Set(s.signatureHeader, githubPrefix+hex.EncodeToString(macSHA256([]byte(secret), body)))
	if id != "" {
		h.Set(s.deliveryHeader, id)
	}
}
