package ingest

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Stripe sends Stripe-Signature: t=<unix>,v1=<hex>[,v1=<hex>…][,v0=<hex>]. Each
// v1 is HMAC-SHA256 over "<t>.<body>" keyed by the whole whsec_… string (its
// bytes, not a decoding of it). Several v1 entries appear while Stripe rolls
// an endpoint's secret; v0 entries are test-mode legacy and never count. The
// delivery id and event type live in the body ("id", "type"), so the id is
// signed. A body without one is deduplicated on its signed "<t>.<body>": a
// replay can only repeat that within the tolerance, and Stripe's retries, which
// re-sign with a new t, always carry an id.
const (
	stripeSignatureHeader = "Stripe-Signature"
	stripeScheme          = "v1"
)

func verifyStripe(secrets []string, h http.Header, body []byte, now time.Time) (Delivery, error) {
	v := h.Get(stripeSignatureHeader)
	if v == "" {
		return Delivery{}, fmt.Errorf("no %s header: %w", stripeSignatureHeader, ErrMissingSignature)
	}
	ts, sigs, err := parseStripeSignature(v)
	if err != nil {
		return Delivery{}, err
	}
	keys, err := rawKeys(secrets)
	if err != nil {
		return Delivery{}, err
	}
	prefix := []byte(strconv.FormatInt(ts, 10) + ".")
	i := matchSecret(keys, sigs, func(k []byte) []byte { return macSHA256(k, prefix, body) })
	if i < 0 {
		return Delivery{}, fmt.Errorf("%s: %w", stripeSignatureHeader, ErrBadSignature)
	}
	if err := checkTimestamp(ts, now); err != nil {
		return Delivery{}, err
	}
	// Stripe always sends a JSON event; a signed body that is not one still
	// came from the secret's holder, so it is accepted without an id.
	var ev struct {
		ID   string `json:"id"`
		Type string `json:"type"`
	}
	_ = json.Unmarshal(body, &ev)
	d, err := verified(TrustSigned, i, ev.ID, ev.Type)
	if err != nil {
		return Delivery{}, err
	}
	if d.ID == "" {
		d.ReplayKey = replayKey(prefix, body)
	}
	return d, nil
}

// parseStripeSignature reads the comma-separated key=value list. It needs
// exactly one t; it keeps up to maxSignatures well-formed v1 signatures and
// skips every other key. Parsing is one pass without allocation per entry,
// however long the header.
func parseStripeSignature(v string) (ts int64, sigs [][]byte, err error) {
	var (
		haveT      bool
		sawV1      bool
		rest       = v
		item       string
		more       = true
		tsDup      bool
		tsBadValue error
	)
	for more {
		item, rest, more = strings.Cut(rest, ",")
		k, val, ok := strings.Cut(strings.TrimSpace(item), "=")
		if !ok {
			continue
		}
		switch k {
		case "t":
			if haveT {
				tsDup = true
				continue
			}
			haveT = true
			ts, tsBadValue = parseUnix(val)
		case stripeScheme:
			sawV1 = true
			if len(sigs) == maxSignatures {
				continue
			}
			if sig, ok := hexSig(val); ok {
				sigs = append(sigs, sig)
			}
		}
	}
	switch {
	case !haveT:
		return 0, nil, fmt.Errorf("%s has no t=: %w", stripeSignatureHeader, ErrMalformed)
	case tsDup:
		return 0, nil, fmt.Errorf("%s has more than one t=: %w", stripeSignatureHeader, ErrMalformed)
	case tsBadValue != nil:
		return 0, nil, fmt.Errorf("%s t=: %w", stripeSignatureHeader, tsBadValue)
	case !sawV1:
		return 0, nil, fmt.Errorf("%s has no v1 signature: %w", stripeSignatureHeader, ErrMissingSignature)
	case len(sigs) == 0:
		return 0, nil, fmt.Errorf("%s has no well-formed v1 signature: %w", stripeSignatureHeader, ErrMalformed)
	}
	return ts, sigs, nil
}

func signStripe(h http.Header, secret string, body []byte, now time.Time) {
	t := strconv.FormatInt(now.Unix(), 10)
	mac := macSHA256([]byte(secret), []byte(t+"."), body)
	h.Set(stripeSignatureHeader, "t="+t+","+stripeScheme+"="+hex.EncodeToString(mac))
}
