package ingest

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"
)

// The Standard Webhooks reference test vector (the spec's libraries and
// svix-webhooks' TestWebhookSign use the same one).
const (
	standardVectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	standardVectorID     = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	standardVectorTS     = "1614265330"
	standardVectorBody   = `{"test": 2432232314}`
	standardVectorSig    = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func TestSignStandardMatchesPublishedVector(t *testing.T) {
	h, err := Sign("standard", standardVectorSecret, standardVectorID, []byte(standardVectorBody), time.Unix(1614265330, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get("webhook-signature"); got != standardVectorSig {
		t.Fatalf("signature %s, want %s", got, standardVectorSig)
	}
	if h.Get("webhook-id") != standardVectorID || h.Get("webhook-timestamp") != standardVectorTS {
		t.Fatalf("headers %v", h)
	}
	if _, err := Sign("standard", standardVectorSecret, "", nil, time.Now()); err == nil {
		t.Fatal("signed without a webhook-id")
	}
	if _, err := Sign("standard", "whsec_not base64!", "id", nil, time.Now()); !errors.Is(err, ErrNoSecret) {
		t.Fatalf("signed with an undecodable secret: %v", err)
	}
}

func TestVerifyStandard(t *testing.T) {
	at := time.Unix(1614265330, 0)
	vec := Delivery{ID: standardVectorID, TrustMode: TrustSigned}
	bad := "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32))
	other := "whsec_" + base64.StdEncoding.EncodeToString([]byte("another secret of 24 b!!"))
	cases := []struct {
		name         string
		secrets      []string
		sig, id, ts  string
		body         string
		now          time.Time
		want         error
		wantD        Delivery
		svixNames    bool
		bothFamilies bool
	}{
		{name: "published vector", secrets: []string{standardVectorSecret}, sig: standardVectorSig, now: at, wantD: vec},
		{name: "published vector, svix-* names", secrets: []string{standardVectorSecret}, sig: standardVectorSig, now: at, wantD: vec, svixNames: true},
		{name: "secret without whsec_", secrets: []string{strings.TrimPrefix(standardVectorSecret, "whsec_")}, sig: standardVectorSig, now: at, wantD: vec},
		{name: "one good among bad", secrets: []string{standardVectorSecret}, sig: bad + " " + standardVectorSig + " " + bad, now: at, wantD: vec},
		{name: "v1a and unknown versions ignored", secrets: []string{standardVectorSecret}, sig: "v1a,c2lnbmVk v2,xyz " + standardVectorSig, now: at, wantD: vec},
		{name: "previous secret", secrets: []string{other, standardVectorSecret}, sig: standardVectorSig, now: at,
			wantD: Delivery{ID: standardVectorID, TrustMode: TrustSigned, Secret: 1}},
		{name: "undecodable previous secret does not lock out", secrets: []string{standardVectorSecret, "whsec_%%%"}, sig: standardVectorSig, now: at, wantD: vec},
		{name: "wrong secret", secrets: []string{other}, sig: standardVectorSig, now: at, want: ErrBadSignature},
		{name: "secret used undecoded", secrets: []string{base64.StdEncoding.EncodeToString([]byte(standardVectorSecret))}, sig: standardVectorSig, now: at, want: ErrBadSignature},
		{name: "only undecodable secrets", secrets: []string{"whsec_%%%"}, sig: standardVectorSig, now: at, want: ErrNoSecret},
		{name: "tampered body", secrets: []string{standardVectorSecret}, sig: standardVectorSig, body: `{"test": 2432232315}`, now: at, want: ErrBadSignature},
		{name: "id changed", secrets: []string{standardVectorSecret}, sig: standardVectorSig, id: "msg_other", now: at, want: ErrBadSignature},
		{name: "timestamp changed", secrets: []string{standardVectorSecret}, sig: standardVectorSig, ts: "1614265331", now: at, want: ErrBadSignature},
		{name: "only bad signatures", secrets: []string{standardVectorSecret}, sig: bad + " " + bad, now: at, want: ErrBadSignature},
		{name: "truncated signature", secrets: []string{standardVectorSecret}, sig: standardVectorSig[:20], now: at, want: ErrMalformed},
		{name: "no comma", secrets: []string{standardVectorSecret}, sig: "v1" + standardVectorSig[3:], now: at, want: ErrMissingSignature},
		{name: "only v1a", secrets: []string{standardVectorSecret}, sig: "v1a,c2lnbmVk", now: at, want: ErrMissingSignature},
		{name: "missing id", secrets: []string{standardVectorSecret}, sig: standardVectorSig, id: "-", now: at, want: ErrMalformed},
		{name: "missing timestamp", secrets: []string{standardVectorSecret}, sig: standardVectorSig, ts: "-", now: at, want: ErrMalformed},
		{name: "missing signature", secrets: []string{standardVectorSecret}, sig: "-", now: at, want: ErrMissingSignature},
		{name: "stale by 301 s", secrets: []string{standardVectorSecret}, sig: standardVectorSig, now: at.Add(301 * time.Second), want: ErrTimestamp},
		{name: "future by 301 s", secrets: []string{standardVectorSecret}, sig: standardVectorSig, now: at.Add(-301 * time.Second), want: ErrTimestamp},
		{name: "stale by 299 s", secrets: []string{standardVectorSecret}, sig: standardVectorSig, now: at.Add(299 * time.Second), wantD: vec},
		{name: "future by 299 s", secrets: []string{standardVectorSecret}, sig: standardVectorSig, now: at.Add(-299 * time.Second), wantD: vec},
		// With both families present the webhook-* one is read, whole: a
		// good svix-signature cannot lend itself to webhook-* values.
		{name: "webhook-* wins over svix-*", secrets: []string{standardVectorSecret}, sig: standardVectorSig, now: at, wantD: vec, bothFamilies: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			orDefault := func(v, def string) string {
				switch v {
				case "":
					return def
				case "-":
					return ""
				}
				return v
			}
			id, ts, body := orDefault(c.id, standardVectorID), orDefault(c.ts, standardVectorTS), orDefault(c.body, standardVectorBody)
			sig := orDefault(c.sig, "")
			names := [3]string{"webhook-id", "webhook-timestamp", "webhook-signature"}
			if c.svixNames {
				names = [3]string{"svix-id", "svix-timestamp", "svix-signature"}
			}
			h := hdr(names[0], id, names[1], ts, names[2], sig)
			if c.bothFamilies {
				h.Set("svix-id", "msg_other")
				h.Set("svix-timestamp", "1")
				h.Set("svix-signature", bad)
			}
			d, err := Verify("standard", c.secrets, h, []byte(body), c.now)
			checkVerify(t, d, err, c.want, c.wantD)
		})
	}
}

func TestVerifyStandardEventType(t *testing.T) {
	secret, err := NewSecret("standard")
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(`{"type":"invoice.paid","timestamp":"2022-11-03T20:26:10.344522Z","data":{}}`)
	now := time.Unix(1_750_000_000, 0)
	h, err := Sign("standard", secret, "msg_2", body, now)
	if err != nil {
		t.Fatal(err)
	}
	d, err := Verify("standard", []string{secret}, h, body, now)
	if err != nil || d != (Delivery{ID: "msg_2", EventType: "invoice.paid", TrustMode: TrustSigned}) {
		t.Fatalf("delivery %+v err %v", d, err)
	}
}

func TestParseStandardSignatureCapsEntries(t *testing.T) {
	bad := "v1," + base64.StdEncoding.EncodeToString(make([]byte, 32))
	header := strings.Repeat(bad+" ", maxSignatures) + standardVectorSig
	sigs, err := parseStandardSignature(header)
	if err != nil || len(sigs) != maxSignatures {
		t.Fatalf("kept %d, err %v", len(sigs), err)
	}
}

func FuzzParseStandardSignature(f *testing.F) {
	for _, s := range []string{
		standardVectorSig, "", " ", ",", "v1,", "v1,=", "v1a,abc " + standardVectorSig,
		standardVectorSig + " " + standardVectorSig, strings.Repeat(standardVectorSig+" ", 40),
		"v1," + strings.Repeat("A", 1000),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		sigs, err := parseStandardSignature(v)
		if err != nil {
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrMissingSignature) {
				t.Fatalf("error wraps no sentinel: %v", err)
			}
			return
		}
		if len(sigs) == 0 || len(sigs) > maxSignatures {
			t.Fatalf("accepted %q with %d signatures", v, len(sigs))
		}
		for _, s := range sigs {
			if len(s) != 32 || !strings.Contains(v, "v1,"+base64.StdEncoding.EncodeToString(s)) {
				t.Fatalf("signature %x is not a v1 entry of %q", s, v)
			}
		}
	})
}
