package ingest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// hdr builds a header from name/value pairs; an empty value leaves the
// header out, so table rows can drop one by blanking it.
func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			h.Set(kv[i], kv[i+1])
		}
	}
	return h
}

// mac is the tests' own HMAC-SHA256, written against crypto/hmac rather than
// the package's helper, for hand-made cases next to the published vectors.
func mac(secret []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, secret)
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

func hexMAC(secret string, parts ...[]byte) string {
	return hex.EncodeToString(mac([]byte(secret), parts...))
}

func b64MAC(secret string, parts ...[]byte) string {
	return base64.StdEncoding.EncodeToString(mac([]byte(secret), parts...))
}

// sentinels are the errors every Verify failure must wrap, so the receiver
// can map each to a status in one place.
var sentinels = []error{ErrUnknownSource, ErrMissingSignature, ErrBadSignature, ErrTimestamp, ErrMalformed, ErrNoSecret}

func wrapsSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// checkVerify runs one table row's expectation against Verify's answer.
func checkVerify(t *testing.T, got Delivery, err, wantErr error, want Delivery) {
	t.Helper()
	if wantErr != nil {
		if !errors.Is(err, wantErr) {
			t.Fatalf("err = %v, want %v", err, wantErr)
		}
		if got != (Delivery{}) {
			t.Fatalf("a failed verification returned %+v", got)
		}
		return
	}
	if err != nil {
		t.Fatalf("err = %v, want success", err)
	}
	if got != want {
		t.Fatalf("delivery = %+v, want %+v", got, want)
	}
}

// Ingest has a verifier, and mints a secret, for each of the store's source
// types and for no other: a type added to one and not the other fails here.
func TestVerifiersMatchTheStoresSourceTypes(t *testing.T) {
	var have []string
	for s := range verifiers {
		have = append(have, s)
	}
	want := store.SourceTypes()
	slices.Sort(have)
	slices.Sort(want)
	if !slices.Equal(have, want) {
		t.Errorf("verifiers for %v, the store's source types %v", have, want)
	}
	for _, s := range want {
		if _, err := NewSecret(s); err != nil {
			t.Errorf("NewSecret(%q): %v", s, err)
		}
	}
}

func TestVerifyUnknownSource(t *testing.T) {
	h := hdr("X-Hub-Signature-256", githubDocSig)
	for _, s := range []string{"", "GitHub", "bitbucket", strings.Repeat("x", 1000)} {
		_, err := Verify(s, []string{githubDocSecret}, h, []byte(githubDocBody), time.Now())
		if !errors.Is(err, ErrUnknownSource) {
			t.Errorf("Verify(%.10q) err = %v, want ErrUnknownSource", s, err)
		}
		if len(err.Error()) > 100 {
			t.Errorf("error echoes the whole source type: %d bytes", len(err.Error()))
		}
	}
	if _, err := Sign("bitbucket", "s", "id", nil, time.Now()); !errors.Is(err, ErrUnknownSource) {
		t.Errorf("Sign(bitbucket) err = %v", err)
	}
}

// TestVerifyEverySource drives every scheme through the same cases with
// secrets NewSecret minted: the happy path, rotation in both orders, wrong
// secret, tampered body, no signature, and unusable secret lists.
func TestVerifyEverySource(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	body := []byte(`{"id":"evt_body","type":"thing.happened","event_id":"Ev1","event":{"type":"app_mention"}}`)
	for _, src := range store.SourceTypes() {
		t.Run(src, func(t *testing.T) {
			current, err := NewSecret(src)
			if err != nil {
				t.Fatal(err)
			}
			previous, err := NewSecret(src)
			if err != nil {
				t.Fatal(err)
			}
			h, err := Sign(src, current, "dlv_1", body, now)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Verify(src, []string{current, previous}, h, body, now)
			if err != nil {
				t.Fatalf("own signature rejected: %v", err)
			}
			if d.Secret != 0 {
				t.Errorf("matched secret %d, want 0", d.Secret)
			}
			wantMode := TrustSigned
			if src == "gitlab" {
				wantMode = TrustToken
			}
			if d.TrustMode != wantMode {
				t.Errorf("trust mode %q, want %q", d.TrustMode, wantMode)
			}
			// A producer not yet updated after a rotation still signs with
			// the previous secret.
			d, err = Verify(src, []string{previous, current}, h, body, now)
			if err != nil || d.Secret != 1 {
				t.Errorf("previous secret: delivery %+v err %v, want Secret 1", d, err)
			}
			if _, err := Verify(src, []string{previous}, h, body, now); !errors.Is(err, ErrBadSignature) {
				t.Errorf("wrong secret: err = %v, want ErrBadSignature", err)
			}
			if src != "gitlab" { // a token does not cover the body
				tampered := append([]byte{}, body...)
				tampered[len(tampered)-2] ^= 1
				if _, err := Verify(src, []string{current}, h, tampered, now); !errors.Is(err, ErrBadSignature) {
					t.Errorf("tampered body: err = %v, want ErrBadSignature", err)
				}
			}
			if _, err := Verify(src, []string{current}, http.Header{}, body, now); !errors.Is(err, ErrMissingSignature) {
				t.Errorf("no headers: err = %v, want ErrMissingSignature", err)
			}
			for _, secrets := range [][]string{nil, {}, {""}, {"", ""}} {
				if _, err := Verify(src, secrets, h, body, now); !errors.Is(err, ErrNoSecret) {
					t.Errorf("secrets %q: err = %v, want ErrNoSecret", secrets, err)
				}
			}
		})
	}
}

// An empty secret must never verify anything: an HMAC keyed with "" (or an
// empty token) is one any sender can produce.
func TestVerifyEmptySecretNeverMatches(t *testing.T) {
	now := time.Unix(1_750_000_000, 0)
	body := []byte(`{"type":"x"}`)
	forged := map[string]http.Header{
		"github":   hdr("X-Hub-Signature-256", "sha256="+hexMAC("", body)),
		"generic":  hdr("X-Signature-256", hexMAC("", body)),
		"stripe":   hdr("Stripe-Signature", "t=1750000000,v1="+hexMAC("", []byte("1750000000."), body)),
		"slack":    hdr("X-Slack-Signature", "v0="+hexMAC("", []byte("v0:1750000000:"), body), "X-Slack-Request-Timestamp", "1750000000"),
		"gitlab":   hdr("X-Gitlab-Token", " "),
		"standard": hdr("Webhook-Id", "m", "Webhook-Timestamp", "1750000000", "Webhook-Signature", "v1,"+b64MAC("", []byte("m.1750000000."), body)),
	}
	for src, h := range forged {
		d, err := Verify(src, []string{"", ""}, h, body, now)
		if err == nil {
			t.Errorf("%s: forged with an empty key accepted: %+v", src, d)
		}
	}
}

// TestTolerance pins |now - t| <= 300 s, in both directions, for every
// scheme that signs a timestamp.
func TestTolerance(t *testing.T) {
	signedAt := time.Unix(1_750_000_000, 0)
	body := []byte(`{"type":"x"}`)
	cases := []struct {
		offset time.Duration // now - signed time
		want   error
	}{
		{-301 * time.Second, ErrTimestamp}, // signed 301 s in the future
		{-300 * time.Second, nil},
		{-299 * time.Second, nil},
		{0, nil},
		{299 * time.Second, nil},
		{300 * time.Second, nil},
		{300*time.Second + 999*time.Millisecond, nil}, // whole seconds
		{301 * time.Second, ErrTimestamp},
		{-24 * time.Hour, ErrTimestamp},
		{24 * time.Hour, ErrTimestamp},
	}
	for _, src := range []string{"stripe", "slack", "standard"} {
		secret, err := NewSecret(src)
		if err != nil {
			t.Fatal(err)
		}
		h, err := Sign(src, secret, "msg_1", body, signedAt)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cases {
			_, err := Verify(src, []string{secret}, h, body, signedAt.Add(c.offset))
			if c.want == nil && err != nil {
				t.Errorf("%s at %v: err = %v, want accepted", src, c.offset, err)
			}
			if c.want != nil && !errors.Is(err, c.want) {
				t.Errorf("%s at %v: err = %v, want %v", src, c.offset, err, c.want)
			}
		}
		// A forged signature with a stale timestamp is a bad signature, not a
		// clock problem: the timestamp is only judged once the MAC holds.
		if _, err := Verify(src, []string{"whsec_" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}, h, body, signedAt.Add(time.Hour)); !errors.Is(err, ErrBadSignature) {
			t.Errorf("%s: forged and stale: err = %v, want ErrBadSignature", src, err)
		}
	}
}

func TestParseUnix(t *testing.T) {
	cases := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1614265330", 1614265330, true},
		{"0", 0, true},
		{"0001614265330", 0, false}, // 13 digits
		{"999999999999", 999999999999, true},
		{"", 0, false},
		{"-1", 0, false},
		{"+1614265330", 0, false},
		{" 1614265330", 0, false},
		{"1614265330.5", 0, false},
		{"1e9", 0, false},
		{"0x10", 0, false},
		{"١٢٣", 0, false}, // Arabic-Indic digits
	}
	for _, c := range cases {
		got, err := parseUnix(c.in)
		if c.ok != (err == nil) || (c.ok && got != c.want) {
			t.Errorf("parseUnix(%q) = %d, %v; want %d ok=%v", c.in, got, err, c.want, c.ok)
		}
		if err != nil && !errors.Is(err, ErrMalformed) {
			t.Errorf("parseUnix(%q) err %v does not wrap ErrMalformed", c.in, err)
		}
	}
}

func FuzzParseUnix(f *testing.F) {
	for _, s := range []string{"1614265330", "", "-1", "99999999999999999999", "0", "1e9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ts, err := parseUnix(s)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error wraps no ErrMalformed: %v", err)
			}
			return
		}
		if ts < 0 || ts >= 1e12 {
			t.Fatalf("parseUnix(%q) = %d out of range", s, ts)
		}
		if want := strings.TrimLeft(s, "0"); strconv.FormatInt(ts, 10) != want && !(ts == 0 && want == "") {
			t.Fatalf("parseUnix(%q) = %d", s, ts)
		}
	})
}

func TestFieldRejectsUnstorableValues(t *testing.T) {
	secret := "s3cret"
	body := []byte("{}")
	cases := []struct {
		name, id string
		want     error
	}{
		{"ordinary", "72d3162e-cc78-11e3-81ab-4c9367dc0958", nil},
		{"padded", "  abc  ", nil},
		{"max length", strings.Repeat("a", maxField), nil},
		{"too long", strings.Repeat("a", maxField+1), ErrMalformed},
		{"control character", "abc\x01def", ErrMalformed},
		{"DEL", "abc\x7f", ErrMalformed},
		{"not UTF-8", "abc\xff", ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := hdr("X-Hub-Signature-256", "sha256="+hexMAC(secret, body))
			h["X-Github-Delivery"] = []string{c.id} // raw: Set would not refuse bad bytes anyway
			d, err := Verify("github", []string{secret}, h, body, time.Now())
			if c.want != nil {
				if !errors.Is(err, c.want) {
					t.Fatalf("err = %v, want %v", err, c.want)
				}
				return
			}
			if err != nil || d.ID != strings.TrimSpace(c.id) {
				t.Fatalf("delivery %+v err %v", d, err)
			}
		})
	}
}

// FuzzVerify throws arbitrary header values and bodies at every scheme: no
// panic, and every failure wraps a sentinel the receiver can map.
func FuzzVerify(f *testing.F) {
	f.Add(uint8(0), githubDocSig, "", "", githubDocBody)
	f.Add(uint8(1), "t=1700000000,v1="+stripeVectorSig, "", "", stripeVectorBody)
	f.Add(uint8(2), slackDocSig, slackDocTS, "", slackDocBody)
	f.Add(uint8(3), standardVectorSig, standardVectorTS, standardVectorID, standardVectorBody)
	f.Add(uint8(4), "token", "", "uuid", "")
	f.Add(uint8(5), "sha256=00", "", "id", "body")
	f.Fuzz(func(t *testing.T, which uint8, sig, ts, id, body string) {
		types := store.SourceTypes()
		src := types[int(which)%len(types)]
		h := http.Header{}
		for _, name := range []string{
			"X-Hub-Signature-256", "Stripe-Signature", "X-Slack-Signature", "Webhook-Signature",
			"Svix-Signature", "X-Gitlab-Token", "X-Signature-256",
		} {
			h[name] = []string{sig}
		}
		for _, name := range []string{"X-Slack-Request-Timestamp", "Webhook-Timestamp", "Svix-Timestamp"} {
			h[name] = []string{ts}
		}
		for _, name := range []string{"X-Github-Delivery", "Webhook-Id", "Svix-Id", "Idempotency-Key", "X-Delivery-Id"} {
			h[name] = []string{id}
		}
		secrets := []string{githubDocSecret, "whsec_2bH7ZpQm4rTq9vX1cY6nL8wE3kS5dF0g", slackDocSecret, standardVectorSecret}
		d, err := Verify(src, secrets, h, []byte(body), time.Unix(1_700_000_000, 0))
		if err != nil {
			if !wrapsSentinel(err) {
				t.Fatalf("%s: error wraps no sentinel: %v", src, err)
			}
			return
		}
		if d.TrustMode == "" || len(d.ID) > maxField || len(d.EventType) > maxField {
			t.Fatalf("%s: accepted with %+v", src, d)
		}
	})
}

// BenchmarkVerify measures one verification per scheme over a 2 KiB body,
// with the current and a previous secret, the current one matching.
func BenchmarkVerify(b *testing.B) {
	now := time.Unix(1_750_000_000, 0)
	body := []byte(`{"id":"evt_bench","type":"bench.event","event_id":"EvBench","pad":"` + strings.Repeat("x", 2048-64) + `"}`)
	for _, src := range store.SourceTypes() {
		b.Run(src, func(b *testing.B) {
			current, err := NewSecret(src)
			if err != nil {
				b.Fatal(err)
			}
			previous, err := NewSecret(src)
			if err != nil {
				b.Fatal(err)
			}
			h, err := Sign(src, current, "dlv_bench", body, now)
			if err != nil {
				b.Fatal(err)
			}
			secrets := []string{current, previous}
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Verify(src, secrets, h, body, now); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
