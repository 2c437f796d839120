package ingest

import (
	"fmt"
	"net/http"
	"strings"
)

// The generic scheme is the common denominator of home-made producers:
// HMAC-SHA256 of the raw body, hex, in X-Signature-256, with or without a
// "sha256=" prefix. Like GitHub's it signs no timestamp and no id: X-Delivery-Id,
// when sent, is an idempotency key, and so is the hash of the body, so the same
// signed body is one delivery whatever id it comes with (a producer that means
// two must make their bodies differ). X-Event-Type, when sent, is the event type.
const (
	genericSignatureHeader = "X-Signature-256"
	genericDeliveryHeader  = "X-Delivery-Id"
	genericEventHeader     = "X-Event-Type"
)

// genericMAC is GitHub's scheme (bodyMAC) under the generic header names.
func genericMAC() bodyMAC {
	return bodyMAC{genericSignatureHeader, genericDeliveryHeader, genericEventHeader, parseGenericSignature}
}

func verifyGeneric(secrets []string, h http.Header, body []byte) (Delivery, error) {
	return genericMAC().verify(secrets, h, body)
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
	genericMAC().sign(h, secret, id, body)
}
