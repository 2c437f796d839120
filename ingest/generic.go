package ingest

import (
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"
)

// The generic scheme is the common denominator of home-made producers:
// HMAC-SHA256 of the raw body, hex, in X-Signature-256, with or without a
// "sha256=" prefix. Like GitHub's it signs no timestamp. X-Delivery-Id, when
// sent, is the idempotency key; X-Event-Type, when sent, the event type.
const (
	genericSignatureHeader = "X-Signature-256"
	genericDeliveryHeader  = "X-Delivery-Id"
	genericEventHeader     = "X-Event-Type"
)

func verifyGeneric(secrets []string, h http.Header, body []byte) (Delivery, error) {
	v := h.Get(genericSignatureHeader)
	if v == "" {
		return Delivery{}, fmt.Errorf("no %s header: %w", genericSignatureHeader, ErrMissingSignature)
	}
	sig, err := parseGenericSignature(v)
	if err != nil {
		return Delivery{}, err
	}
	keys, err := rawKeys(secrets)
	if err != nil {
		return Delivery{}, err
	}
	i := matchSecret(keys, [][]byte{sig}, func(k []byte) []byte { return macSHA256(k, body) })
	if i < 0 {
		return Delivery{}, fmt.Errorf("%s: %w", genericSignatureHeader, ErrBadSignature)
	}
	d := Delivery{TrustMode: TrustSigned, Secret: i}
	if err := d.setFields(h.Get(genericDeliveryHeader), h.Get(genericEventHeader)); err != nil {
		return Delivery{}, err
	}
	return d, nil
}

// parseGenericSignature reads "[sha256=]<64 hex>".
func parseGenericSignature(v string) ([]byte, error) {
	v = strings.TrimSpace(v)
	v = strings.TrimPrefix(v, githubPrefix)
	sig, ok := hexSig(v)
	if !ok {
		return nil, fmt.Errorf("%s is not 64 hex digits: %w", genericSignatureHeader, ErrMalformed)
	}
	return sig, nil
}

func signGeneric(h http.Header, secret, id string, body []byte) {
	h.Set(genericSignatureHeader, githubPrefix+hex.EncodeToString(macSHA256([]byte(secret), body)))
	if id != "" {
		h.Set(genericDeliveryHeader, id)
	}
}
