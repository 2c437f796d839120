package ingest

import (
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"
)

// Slack's worked example ("Verifying requests from Slack",
// api.slack.com/authentication/verifying-requests-from-slack): a slash
// command, form-encoded.
const (
	slackDocSecret = "8f742231b10e8888abcd99yyyzzz85a5"
	slackDocTS     = "1531420618"
	slackDocBody   = "token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
	slackDocSig    = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
)

func TestSignSlackMatchesPublishedVector(t *testing.T) {
	h, err := Sign("slack", slackDocSecret, "", []byte(slackDocBody), time.Unix(1531420618, 0))
	if err != nil {
		t.Fatal(err)
	}
	if got := h.Get("X-Slack-Signature"); got != slackDocSig {
		t.Fatalf("signature %s, want Slack's %s", got, slackDocSig)
	}
	if got := h.Get("X-Slack-Request-Timestamp"); got != slackDocTS {
		t.Fatalf("timestamp %s", got)
	}
}

func TestVerifySlack(t *testing.T) {
	at := time.Unix(1531420618, 0)
	// A slash command has no event_id: the signed "v0:ts:body" is its replay key.
	key := sha256.Sum256([]byte("v0:" + slackDocTS + ":" + slackDocBody))
	cmd := Delivery{ReplayKey: key, EventType: "slash_command", TrustMode: TrustSigned}
	cases := []struct {
		name    string
		secrets []string
		sig, ts string
		body    string
		now     time.Time
		want    error
		wantD   Delivery
	}{
		{"published example", []string{slackDocSecret}, slackDocSig, slackDocTS, slackDocBody, at, nil, cmd},
		{"previous secret", []string{"new", slackDocSecret}, slackDocSig, slackDocTS, slackDocBody, at, nil,
			Delivery{ReplayKey: key, EventType: "slash_command", TrustMode: TrustSigned, Secret: 1}},
		{"wrong secret", []string{"8f742231b10e8888abcd99yyyzzz85a6"}, slackDocSig, slackDocTS, slackDocBody, at, ErrBadSignature, Delivery{}},
		{"tampered body", []string{slackDocSecret}, slackDocSig, slackDocTS, strings.Replace(slackDocBody, "foobar", "foobaz", 1), at, ErrBadSignature, Delivery{}},
		{"timestamp header changed", []string{slackDocSecret}, slackDocSig, "1531420619", slackDocBody, at, ErrBadSignature, Delivery{}},
		{"leading zero is a different signed string", []string{slackDocSecret}, slackDocSig, "0" + slackDocTS, slackDocBody, at, ErrBadSignature, Delivery{}},
		{"truncated", []string{slackDocSecret}, slackDocSig[:20], slackDocTS, slackDocBody, at, ErrMalformed, Delivery{}},
		{"v1 prefix", []string{slackDocSecret}, "v1=" + slackDocSig[3:], slackDocTS, slackDocBody, at, ErrMalformed, Delivery{}},
		{"missing timestamp", []string{slackDocSecret}, slackDocSig, "", slackDocBody, at, ErrMalformed, Delivery{}},
		{"timestamp not a number", []string{slackDocSecret}, slackDocSig, "yesterday", slackDocBody, at, ErrMalformed, Delivery{}},
		{"missing signature", []string{slackDocSecret}, "", slackDocTS, slackDocBody, at, ErrMissingSignature, Delivery{}},
		{"stale by 301 s", []string{slackDocSecret}, slackDocSig, slackDocTS, slackDocBody, at.Add(301 * time.Second), ErrTimestamp, Delivery{}},
		{"future by 301 s", []string{slackDocSecret}, slackDocSig, slackDocTS, slackDocBody, at.Add(-301 * time.Second), ErrTimestamp, Delivery{}},
		{"stale by 299 s", []string{slackDocSecret}, slackDocSig, slackDocTS, slackDocBody, at.Add(299 * time.Second), nil, cmd},
		{"future by 299 s", []string{slackDocSecret}, slackDocSig, slackDocTS, slackDocBody, at.Add(-299 * time.Second), nil, cmd},
		// Slack's own SDKs accept this (they only reject the past); we do not.
		{"published example verified today", []string{slackDocSecret}, slackDocSig, slackDocTS, slackDocBody, time.Now(), ErrTimestamp, Delivery{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := hdr("X-Slack-Signature", c.sig, "X-Slack-Request-Timestamp", c.ts)
			d, err := Verify("slack", c.secrets, h, []byte(c.body), c.now)
			checkVerify(t, d, err, c.want, c.wantD)
		})
	}
}

// The url_verification handshake yields the challenge, but only once the
// signature holds; the body shapes of the Events API and interactivity give
// their event id and type; a body without an event id is keyed on its signed bytes.
func TestVerifySlackBodies(t *testing.T) {
	const secret = "slack-signing-secret"
	at := time.Unix(1_750_000_000, 0)
	cases := []struct {
		name  string
		body  string
		want  error
		wantD Delivery
		keyed bool // no event_id: the replay key is the hash of "v0:ts:body"
	}{
		{"url_verification",
			`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`, nil,
			Delivery{EventType: "url_verification", Challenge: "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P", TrustMode: TrustSigned}, true},
		{"url_verification without challenge", `{"type":"url_verification"}`, ErrMalformed, Delivery{}, false},
		{"event_callback",
			`{"type":"event_callback","event_id":"Ev08MFMKH6","event":{"type":"app_mention","text":"hi"}}`, nil,
			Delivery{ID: "Ev08MFMKH6", EventType: "app_mention", TrustMode: TrustSigned}, false},
		{"app_rate_limited", `{"type":"app_rate_limited","team_id":"T1"}`, nil,
			Delivery{EventType: "app_rate_limited", TrustMode: TrustSigned}, true},
		{"interactivity payload", "payload=%7B%22type%22%3A%22block_actions%22%7D", nil,
			Delivery{EventType: "block_actions", TrustMode: TrustSigned}, true},
		{"not JSON, not a form", "\x00\x01", nil, Delivery{TrustMode: TrustSigned}, true},
		{"broken JSON", `{"type":`, nil, Delivery{TrustMode: TrustSigned}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h, err := Sign("slack", secret, "", []byte(c.body), at)
			if err != nil {
				t.Fatal(err)
			}
			d, err := Verify("slack", []string{secret}, h, []byte(c.body), at)
			if c.keyed {
				c.wantD.ReplayKey = sha256.Sum256([]byte("v0:1750000000:" + c.body))
			}
			checkVerify(t, d, err, c.want, c.wantD)
		})
	}
	// A forged handshake must not get its challenge echoed.
	body := []byte(`{"challenge":"echo-me","type":"url_verification"}`)
	h := hdr("X-Slack-Signature", "v0="+strings.Repeat("0", 64), "X-Slack-Request-Timestamp", "1750000000")
	d, err := Verify("slack", []string{secret}, h, body, at)
	if !errors.Is(err, ErrBadSignature) || d.Challenge != "" {
		t.Fatalf("forged url_verification: %+v, %v", d, err)
	}
}

func FuzzParseSlackSignature(f *testing.F) {
	for _, s := range []string{slackDocSig, "", "v0=", "v0", "v1=" + slackDocSig[3:], slackDocSig + "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		sig, err := parseSlackSignature(v)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error wraps no ErrMalformed: %v", err)
			}
			return
		}
		if len(sig) != 32 {
			t.Fatalf("accepted %q as a %d-byte signature", v, len(sig))
		}
	})
}

func FuzzParseSlackBody(f *testing.F) {
	for _, s := range []string{slackDocBody, `{"type":"url_verification","challenge":"c"}`, `{"event":{"type":"x"},"event_id":"E"}`, "payload=%7B%7D", "", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		id, eventType, challenge := parseSlackBody([]byte(body))
		if challenge != "" && eventType != slackURLVerification {
			t.Fatalf("challenge %q outside url_verification (%q)", challenge, eventType)
		}
		_ = id
	})
}
