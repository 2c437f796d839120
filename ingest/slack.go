package ingest

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Slack sends X-Slack-Signature: v0=<hex>, HMAC-SHA256 over
// "v0:<X-Slack-Request-Timestamp>:<body>" keyed by the app's signing secret.
// Events API bodies are JSON (event_callback, url_verification, …);
// slash commands and interactivity are form-encoded, the latter with a JSON
// "payload" field. event_id, inside the signed body, is the idempotency key
// when there is one; a body without it (a slash command, an interaction) is
// deduplicated on the signed "v0:<timestamp>:<body>", which a replay can only
// repeat within the tolerance.
const (
	slackSignatureHeader = "X-Slack-Signature"
	slackTimestampHeader = "X-Slack-Request-Timestamp"
	slackVersion         = "v0"
	slackURLVerification = "url_verification"
	slackSlashCommand    = "slash_command"
)

func verifySlack(secrets []string, h http.Header, body []byte, now time.Time) (Delivery, error) {
	v := h.Get(slackSignatureHeader)
	if v == "" {
		return Delivery{}, fmt.Errorf("no %s header: %w", slackSignatureHeader, ErrMissingSignature)
	}
	sig, err := parseSlackSignature(v)
	if err != nil {
		return Delivery{}, err
	}
	tsText := h.Get(slackTimestampHeader)
	ts, err := parseUnix(tsText)
	if err != nil {
		return Delivery{}, fmt.Errorf("%s: %w", slackTimestampHeader, err)
	}
	keys, err := rawKeys(secrets)
	if err != nil {
		return Delivery{}, err
	}
	// Sign the digits as they arrived (parseUnix accepted only digits, so a
	// leading zero is the one way they can differ from the parsed number).
	prefix := []byte(slackVersion + ":" + tsText + ":")
	i := matchSecret(keys, [][]byte{sig}, func(k []byte) []byte { return macSHA256(k, prefix, body) })
	if i < 0 {
		return Delivery{}, fmt.Errorf("%s: %w", slackSignatureHeader, ErrBadSignature)
	}
	if err := checkTimestamp(ts, now); err != nil {
		return Delivery{}, err
	}
	id, eventType, challenge := parseSlackBody(body)
	d, err := verified(TrustSigned, i, id, eventType)
	if err != nil {
		return Delivery{}, err
	}
	if d.ID == "" {
		d.ReplayKey = replayKey(prefix, body)
	}
	if eventType == slackURLVerification {
		if d.Challenge, err = field("challenge", challenge); err != nil {
			return Delivery{}, err
		}
		if d.Challenge == "" {
			return Delivery{}, fmt.Errorf("url_verification without a challenge: %w", ErrMalformed)
		}
	}
	return d, nil
}

// parseSlackSignature reads "v0=<64 hex>".
func parseSlackSignature(v string) ([]byte, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(v), slackVersion+"=")
	if !ok {
		return nil, fmt.Errorf("%s lacks the %s= prefix: %w", slackSignatureHeader, slackVersion, ErrMalformed)
	}
	sig, ok := hexSig(rest)
	if !ok {
		return nil, fmt.Errorf("%s is not 64 hex digits: %w", slackSignatureHeader, ErrMalformed)
	}
	return sig, nil
}

// slackEnvelope is the part of a Slack JSON body we read: the outer type,
// the Events API event_id and inner event type, and the handshake challenge.
type slackEnvelope struct {
	Type      string `json:"type"`
	EventID   string `json:"event_id"`
	Challenge string `json:"challenge"`
	Event     struct {
		Type string `json:"type"`
	} `json:"event"`
}

// parseSlackBody extracts the delivery id, event type and challenge from an
// already verified body. It never fails: a body it cannot read yields "".
func parseSlackBody(body []byte) (id, eventType, challenge string) {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) > 0 && trimmed[0] == '{' {
		var env slackEnvelope
		if json.Unmarshal(trimmed, &env) != nil {
			return "", "", ""
		}
		switch {
		case env.Type == slackURLVerification:
			return env.EventID, slackURLVerification, env.Challenge
		case env.Event.Type != "":
			return env.EventID, env.Event.Type, ""
		default:
			return env.EventID, env.Type, ""
		}
	}
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return "", "", ""
	}
	if p := form.Get("payload"); p != "" {
		var env slackEnvelope
		if json.Unmarshal([]byte(p), &env) != nil {
			return "", "", ""
		}
		return "", env.Type, ""
	}
	if form.Get("command") != "" {
		return "", slackSlashCommand, ""
	}
	return "", "", ""
}

func signSlack(h http.Header, secret string, body []byte, now time.Time) {
	t := strconv.FormatInt(now.Unix(), 10)
	mac := macSHA256([]byte(secret), []byte(slackVersion+":"+t+":"), body)
	h.Set(slackTimestampHeader, t)
	h.Set(slackSignatureHeader, slackVersion+"="+hex.EncodeToString(mac))
}
