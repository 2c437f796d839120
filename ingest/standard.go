package ingest

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks (the spec Svix wrote and still sends under svix-* header
// names): webhook-signature holds space-separated "<version>,<base64>"
// entries; each v1 is HMAC-SHA256 over "<webhook-id>.<webhook-timestamp>.<body>"
// keyed by the base64 decoding of the secret after its "whsec_" prefix.
// Entries of other versions (v1a is an asymmetric scheme) are ignored. The
// webhook-id is signed, so it alone is the idempotency key.
const (
	standardIDHeader        = "Webhook-Id"
	standardTimestampHeader = "Webhook-Timestamp"
	standardSignatureHeader = "Webhook-Signature"
	svixIDHeader            = "Svix-Id"
	svixTimestampHeader     = "Svix-Timestamp"
	svixSignatureHeader     = "Svix-Signature"
	standardSecretPrefix    = "whsec_"
	standardVersion         = "v1"
)

func verifyStandard(secrets []string, h http.Header, body []byte, now time.Time) (Delivery, error) {
	// One header family per request: never an id from one and a signature
	// from the other.
	idH, tsH, sigH := standardIDHeader, standardTimestampHeader, standardSignatureHeader
	if h.Get(sigH) == "" && h.Get(svixSignatureHeader) != "" {
		idH, tsH, sigH = svixIDHeader, svixTimestampHeader, svixSignatureHeader
	}
	v := h.Get(sigH)
	if v == "" {
		return Delivery{}, fmt.Errorf("no %s header: %w", standardSignatureHeader, ErrMissingSignature)
	}
	sigs, err := parseStandardSignature(v)
	if err != nil {
		return Delivery{}, err
	}
	id := h.Get(idH)
	if id == "" {
		return Delivery{}, fmt.Errorf("no %s header: %w", idH, ErrMalformed)
	}
	tsText := h.Get(tsH)
	ts, err := parseUnix(tsText)
	if err != nil {
		return Delivery{}, fmt.Errorf("%s: %w", tsH, err)
	}
	keys, err := standardKeys(secrets)
	if err != nil {
		return Delivery{}, err
	}
	prefix := []byte(id + "." + tsText + ".")
	i := matchSecret(keys, sigs, func(k []byte) []byte { return macSHA256(k, prefix, body) })
	if i < 0 {
		return Delivery{}, fmt.Errorf("%s: %w", sigH, ErrBadSignature)
	}
	if err := checkTimestamp(ts, now); err != nil {
		return Delivery{}, err
	}
	// The spec's payload is {"type": …, "timestamp": …, "data": …}; a body of
	// another shape is still a valid delivery, just without an event type.
	var ev struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &ev)
	return verified(TrustSigned, i, id, ev.Type)
}

// parseStandardSignature reads space-separated "version,base64" entries and
// keeps up to maxSignatures well-formed v1 ones (32 bytes once decoded).
func parseStandardSignature(v string) ([][]byte, error) {
	var (
		sigs  [][]byte
		sawV1 bool
		rest  = v
		entry string
		more  = true
	)
	for more {
		entry, rest, more = strings.Cut(rest, " ")
		version, b64, ok := strings.Cut(entry, ",")
		if !ok || version != standardVersion {
			continue
		}
		sawV1 = true
		// Strict, and no CR/LF (which the decoder would skip): one signature
		// has exactly one spelling.
		if len(sigs) == maxSignatures || base64.StdEncoding.DecodedLen(len(b64)) > 33 || strings.ContainsAny(b64, "\r\n") {
			continue
		}
		sig, err := base64.StdEncoding.Strict().DecodeString(b64)
		if err != nil || len(sig) != 32 {
			continue
		}
		sigs = append(sigs, sig)
	}
	switch {
	case !sawV1:
		return nil, fmt.Errorf("%s has no v1 signature: %w", standardSignatureHeader, ErrMissingSignature)
	case len(sigs) == 0:
		return nil, fmt.Errorf("%s has no well-formed v1 signature: %w", standardSignatureHeader, ErrMalformed)
	}
	return sigs, nil
}

// standardKeys decodes each candidate secret: the base64 after "whsec_"
// (the prefix is optional, as in the reference libraries). A secret that
// does not decode is unusable rather than fatal, so a bad previous secret
// cannot lock out the current one.
func standardKeys(secrets []string) ([][]byte, error) {
	keys := make([][]byte, len(secrets))
	usable := false
	for i, s := range secrets {
		k, err := standardKey(s)
		if err != nil {
			continue
		}
		keys[i] = k
		usable = true
	}
	if !usable {
		return nil, ErrNoSecret
	}
	return keys, nil
}

func standardKey(secret string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, standardSecretPrefix))
	if err != nil {
		return nil, fmt.Errorf("standard secret is not base64: %w", ErrNoSecret)
	}
	if len(k) == 0 {
		return nil, ErrNoSecret
	}
	return k, nil
}

func signStandard(h http.Header, secret, id string, body []byte, now time.Time) error {
	if id == "" {
		return errors.New("a standard webhook needs a delivery id to sign")
	}
	key, err := standardKey(secret)
	if err != nil {
		return err
	}
	t := strconv.FormatInt(now.Unix(), 10)
	mac := macSHA256(key, []byte(id+"."+t+"."), body)
	h.Set(standardIDHeader, id)
	h.Set(standardTimestampHeader, t)
	h.Set(standardSignatureHeader, standardVersion+","+base64.StdEncoding.EncodeToString(mac))
	return nil
}
