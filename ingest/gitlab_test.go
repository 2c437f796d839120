package ingest

import (
	"errors"
	"net/http"
	"testing"
	"time"
)

// GitLab publishes no signature vector because it signs nothing: the secret
// token comes back verbatim in X-Gitlab-Token.
func TestVerifyGitLab(t *testing.T) {
	const token = "0f8e6c1b2a3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f"
	const idem, uuid = "908a6d9e-45fd-46c8-97e6-c4f350f219dd", "1f5c2a3e-0000-4000-8000-000000000001"
	cases := []struct {
		name    string
		secrets []string
		h       http.Header
		want    error
		wantD   Delivery
	}{
		{"token, idempotency key preferred", []string{token},
			hdr("X-Gitlab-Token", token, "Idempotency-Key", idem, "X-Gitlab-Event-UUID", uuid, "X-Gitlab-Event", "Push Hook"), nil,
			Delivery{ID: idem, EventType: "Push Hook", TrustMode: TrustToken}},
		{"older GitLab: event UUID", []string{token},
			hdr("X-Gitlab-Token", token, "X-Gitlab-Event-UUID", uuid, "X-Gitlab-Event", "Merge Request Hook"), nil,
			Delivery{ID: uuid, EventType: "Merge Request Hook", TrustMode: TrustToken}},
		{"no id at all", []string{token}, hdr("X-Gitlab-Token", token), nil,
			Delivery{TrustMode: TrustToken}},
		{"previous token during rotation", []string{"new-token", token}, hdr("X-Gitlab-Token", token), nil,
			Delivery{TrustMode: TrustToken, Secret: 1}},
		{"wrong token", []string{token}, hdr("X-Gitlab-Token", "not-the-token"), ErrBadSignature, Delivery{}},
		{"truncated token", []string{token}, hdr("X-Gitlab-Token", token[:len(token)-1]), ErrBadSignature, Delivery{}},
		{"longer token", []string{token}, hdr("X-Gitlab-Token", token+"0"), ErrBadSignature, Delivery{}},
		{"case differs", []string{token}, hdr("X-Gitlab-Token", "0F8E6C1B2A3D4E5F60718293A4B5C6D7E8F90A1B2C3D4E5F"), ErrBadSignature, Delivery{}},
		{"missing", []string{token}, hdr("X-Gitlab-Event", "Push Hook"), ErrMissingSignature, Delivery{}},
		{"empty secret never matches", []string{""}, hdr("X-Gitlab-Token", " "), ErrNoSecret, Delivery{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Verify("gitlab", c.secrets, c.h, []byte(`{"object_kind":"push"}`), time.Now())
			checkVerify(t, d, err, c.want, c.wantD)
		})
	}
}

// The token is compared by digest, so even a header of absurd length is one
// hash and one fixed-size compare, and answers ErrBadSignature.
func TestVerifyGitLabLongToken(t *testing.T) {
	long := make([]byte, 64<<10)
	for i := range long {
		long[i] = 'a'
	}
	_, err := Verify("gitlab", []string{"tok"}, hdr("X-Gitlab-Token", string(long)), nil, time.Now())
	if !errors.Is(err, ErrBadSignature) {
		t.Fatalf("err = %v", err)
	}
}
