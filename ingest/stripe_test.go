package ingest

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// Stripe publishes the scheme (stripe.com/docs/webhooks#verify-manually) but
// no test vector, so this one was computed by hand outside Go:
//
//	python3 -c 'import hmac,hashlib; print(hmac.new(b"whsec_2bH7ZpQm4rTq9vX1cY6nL8wE3kS5dF0g",
//	  b"1700000000." + BODY, hashlib.sha256).hexdigest())'
//
// TestSignersFromNPM checks the scheme again against stripe-node's own signer.
const (
	stripeVectorSecret = "whsec_2bH7ZpQm4rTq9vX1cY6nL8wE3kS5dF0g"
	stripeVectorBody   = `{"id":"evt_1OjD3k2eZvKYlo2C0a1b2c3d","object":"event","type":"payment_intent.succeeded"}`
	stripeVectorTS     = 1700000000
	stripeVectorSig    = "a0ed90555e53f170e7e16a89c79317adba693e9b15f5110a4319f5121a9e625b"
)

func TestSignStripeMatchesHandComputedVector(t *testing.T) {
	h, err := Sign("stripe", stripeVectorSecret, "", []byte(stripeVectorBody), time.Unix(stripeVectorTS, 0))
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("t=%d,v1=%s", stripeVectorTS, stripeVectorSig)
	if got := h.Get("Stripe-Signature"); got != want {
		t.Fatalf("Stripe-Signature %s, want %s", got, want)
	}
}

func TestVerifyStripe(t *testing.T) {
	at := time.Unix(stripeVectorTS, 0)
	bad := strings.Repeat("0", 64)
	v0 := hexMAC(stripeVectorSecret, []byte("1700000000."), []byte(stripeVectorBody)) // right MAC, wrong scheme
	ok := Delivery{ID: "evt_1OjD3k2eZvKYlo2C0a1b2c3d", EventType: "payment_intent.succeeded", TrustMode: TrustSigned}
	cases := []struct {
		name    string
		secrets []string
		header  string
		body    string
		now     time.Time
		want    error
		wantD   Delivery
	}{
		{"hand-computed vector", []string{stripeVectorSecret}, "t=1700000000,v1=" + stripeVectorSig, stripeVectorBody, at, nil, ok},
		{"v0 alongside", []string{stripeVectorSecret}, "t=1700000000,v1=" + stripeVectorSig + ",v0=" + bad, stripeVectorBody, at, nil, ok},
		{"one good among bad v1s", []string{stripeVectorSecret}, "t=1700000000,v1=" + bad + ",v1=" + stripeVectorSig + ",v1=" + bad, stripeVectorBody, at, nil, ok},
		{"order of keys does not matter", []string{stripeVectorSecret}, "v1=" + stripeVectorSig + ",t=1700000000", stripeVectorBody, at, nil, ok},
		{"spaces after commas", []string{stripeVectorSecret}, "t=1700000000, v1=" + stripeVectorSig, stripeVectorBody, at, nil, ok},
		{"unknown keys ignored", []string{stripeVectorSecret}, "t=1700000000,v9=xyz,junk,v1=" + stripeVectorSig, stripeVectorBody, at, nil, ok},
		{"previous secret during a roll", []string{"whsec_new", stripeVectorSecret}, "t=1700000000,v1=" + stripeVectorSig, stripeVectorBody, at, nil,
			Delivery{ID: ok.ID, EventType: ok.EventType, TrustMode: TrustSigned, Secret: 1}},
		{"wrong secret", []string{"whsec_other"}, "t=1700000000,v1=" + stripeVectorSig, stripeVectorBody, at, ErrBadSignature, Delivery{}},
		{"secret without its whsec_ prefix", []string{strings.TrimPrefix(stripeVectorSecret, "whsec_")}, "t=1700000000,v1=" + stripeVectorSig, stripeVectorBody, at, ErrBadSignature, Delivery{}},
		{"tampered body", []string{stripeVectorSecret}, "t=1700000000,v1=" + stripeVectorSig, strings.Replace(stripeVectorBody, "succeeded", "failed", 1), at, ErrBadSignature, Delivery{}},
		{"timestamp changed", []string{stripeVectorSecret}, "t=1700000001,v1=" + stripeVectorSig, stripeVectorBody, at, ErrBadSignature, Delivery{}},
		{"only v0 counts for nothing", []string{stripeVectorSecret}, "t=1700000000,v0=" + v0, stripeVectorBody, at, ErrMissingSignature, Delivery{}},
		{"truncated v1", []string{stripeVectorSecret}, "t=1700000000,v1=" + stripeVectorSig[:40], stripeVectorBody, at, ErrMalformed, Delivery{}},
		{"truncated after t", []string{stripeVectorSecret}, "t=1700000000,", stripeVectorBody, at, ErrMissingSignature, Delivery{}},
		{"no t", []string{stripeVectorSecret}, "v1=" + stripeVectorSig, stripeVectorBody, at, ErrMalformed, Delivery{}},
		{"two t", []string{stripeVectorSecret}, "t=1700000000,t=1700000000,v1=" + stripeVectorSig, stripeVectorBody, at, ErrMalformed, Delivery{}},
		{"t not a number", []string{stripeVectorSecret}, "t=soon,v1=" + stripeVectorSig, stripeVectorBody, at, ErrMalformed, Delivery{}},
		{"negative t", []string{stripeVectorSecret}, "t=-1,v1=" + stripeVectorSig, stripeVectorBody, at, ErrMalformed, Delivery{}},
		{"stale by 301 s", []string{stripeVectorSecret}, "t=1700000000,v1=" + stripeVectorSig, stripeVectorBody, at.Add(301 * time.Second), ErrTimestamp, Delivery{}},
		{"future by 301 s", []string{stripeVectorSecret}, "t=1700000000,v1=" + stripeVectorSig, stripeVectorBody, at.Add(-301 * time.Second), ErrTimestamp, Delivery{}},
		{"stale by 299 s", []string{stripeVectorSecret}, "t=1700000000,v1=" + stripeVectorSig, stripeVectorBody, at.Add(299 * time.Second), nil, ok},
		{"future by 299 s", []string{stripeVectorSecret}, "t=1700000000,v1=" + stripeVectorSig, stripeVectorBody, at.Add(-299 * time.Second), nil, ok},
		{"missing", []string{stripeVectorSecret}, "", stripeVectorBody, at, ErrMissingSignature, Delivery{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, err := Verify("stripe", c.secrets, hdr("Stripe-Signature", c.header), []byte(c.body), c.now)
			checkVerify(t, d, err, c.want, c.wantD)
		})
	}
}

// A signed body that is not a JSON event is authentic but has no id.
func TestVerifyStripeNonJSONBody(t *testing.T) {
	body := []byte("not json")
	at := time.Unix(stripeVectorTS, 0)
	h := hdr("Stripe-Signature", "t=1700000000,v1="+hexMAC(stripeVectorSecret, []byte("1700000000."), body))
	d, err := Verify("stripe", []string{stripeVectorSecret}, h, body, at)
	// Without an id, the signed "t.body" is the replay key.
	if err != nil || d != (Delivery{ReplayKey: sha256.Sum256([]byte("1700000000." + string(body))), TrustMode: TrustSigned}) {
		t.Fatalf("delivery %+v err %v", d, err)
	}
}

// Only the first maxSignatures v1 entries are checked: a good signature
// hidden behind a wall of bad ones is not searched for.
func TestParseStripeSignatureCapsEntries(t *testing.T) {
	bad := strings.Repeat("0", 64)
	header := "t=1700000000" + strings.Repeat(",v1="+bad, maxSignatures) + ",v1=" + stripeVectorSig
	_, sigs, err := parseStripeSignature(header)
	if err != nil || len(sigs) != maxSignatures {
		t.Fatalf("kept %d signatures, err %v; want %d", len(sigs), err, maxSignatures)
	}
	_, err = Verify("stripe", []string{stripeVectorSecret}, hdr("Stripe-Signature", header), []byte(stripeVectorBody), time.Unix(stripeVectorTS, 0))
	if !errors.Is(err, ErrBadSignature) {
		t.Fatalf("err = %v, want ErrBadSignature past the cap", err)
	}
}

func FuzzParseStripeSignature(f *testing.F) {
	for _, s := range []string{
		"t=1700000000,v1=" + stripeVectorSig,
		"t=1700000000,v1=" + stripeVectorSig + ",v1=" + stripeVectorSig + ",v0=00",
		"", ",", "=", "t=", "v1=", "t=1,t=2", "t=99999999999999999999,v1=" + stripeVectorSig,
		strings.Repeat("v1="+stripeVectorSig+",", 40) + "t=1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		ts, sigs, err := parseStripeSignature(v)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrMissingSignature) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if ts < 0 || ts >= 1e12 || len(sigs) == 0 || len(sigs) > maxSignatures {
			t.Fatalf("accepted %q as t=%d with %d signatures", v, ts, len(sigs))
		}
		for _, s := range sigs {
			if len(s) != 32 {
				t.Fatalf("accepted a %d-byte signature from %q", len(s), v)
			}
		}
	})
}
