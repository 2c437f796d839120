package ingest

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
)

// GitLab does not sign deliveries: it sends the webhook's secret token in
// X-Gitlab-Token, so the trust mode is "token", not "signed". The
// Idempotency-Key header (newer GitLab releases) stays the same across retries of one
// delivery; older versions send only X-Gitlab-Event-UUID. Those ids are the only
// idempotency key: the token is not bound to the body, so whoever captured one
// delivery holds the token and can send any body under any id, and a hash of the
// body would stop only a verbatim replay while merging honest deliveries whose
// bodies happen to be equal.
const (
	gitlabTokenHeader       = "X-Gitlab-Token"
	gitlabIdempotencyHeader = "Idempotency-Key"
	gitlabEventUUIDHeader   = "X-Gitlab-Event-UUID"
	gitlabEventHeader       = "X-Gitlab-Event"
)

func verifyGitLab(secrets []string, h http.Header) (Delivery, error) {
	token := h.Get(gitlabTokenHeader)
	if token == "" {
		return Delivery{}, fmt.Errorf("no %s header: %w", gitlabTokenHeader, ErrMissingSignature)
	}
	keys, err := rawKeys(secrets)
	if err != nil {
		return Delivery{}, err
	}
	// Compare digests, not the strings: subtle.ConstantTimeCompare returns
	// early on a length mismatch, which would leak the token's length.
	got := sha256.Sum256([]byte(token))
	match := -1
	for i, k := range keys {
		if k == nil {
			continue
		}
		want := sha256.Sum256(k)
		if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
			match = i
			break
		}
	}
	if match < 0 {
		return Delivery{}, fmt.Errorf("%s: %w", gitlabTokenHeader, ErrBadSignature)
	}
	id := h.Get(gitlabIdempotencyHeader)
	if id == "" {
		id = h.Get(gitlabEventUUIDHeader)
	}
	return verified(TrustToken, match, id, h.Get(gitlabEventHeader))
}

func signGitLab(h http.Header, secret, id string) {
	h.Set(gitlabTokenHeader, secret)
	if id != "" {
		h.Set(gitlabEventUUIDHeader, id)
	}
}
