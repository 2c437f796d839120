package ingest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"os/exec"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// npmSigner installs ingest/npmsign (from its lockfile) into a temporary
// copy and returns a function that runs sign.mjs on a batch of requests.
func npmSigner(t *testing.T) func(reqs []npmSignRequest) []map[string]string {
	t.Helper()
	dir, node := testkit.NPMInstall(t, "npmsign", "package.json", "package-lock.json", "sign.mjs")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return func(reqs []npmSignRequest) []map[string]string {
		t.Helper()
		in, err := json.Marshal(reqs)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, node, "sign.mjs")
		cmd.Dir = dir
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("sign.mjs: %v: %s", err, stderr.String())
		}
		var headers []map[string]string
		if err := json.Unmarshal(out, &headers); err != nil {
			t.Fatalf("sign.mjs output %q: %v", out, err)
		}
		if len(headers) != len(reqs) {
			t.Fatalf("sign.mjs answered %d of %d requests", len(headers), len(reqs))
		}
		return headers
	}
}

// npmSignRequest is sign.mjs's stdin contract (see the top of that file).
type npmSignRequest struct {
	Scheme    string `json:"scheme"`
	Secret    string `json:"secret"`
	Body      string `json:"body"`
	Timestamp int64  `json:"timestamp,omitempty"`
	ID        string `json:"id,omitempty"`
	Event     string `json:"event,omitempty"`
}

// TestSignersFromNPM signs deliveries with @octokit/webhooks-methods, stripe
// and standardwebhooks, using secrets NewSecret minted (so the forms we hand
// out are ones those libraries accept) and the published vectors, and checks
// that Verify accepts exactly what they produce and nothing near it.
func TestSignersFromNPM(t *testing.T) {
	sign := npmSigner(t)
	const ts = 1_750_000_000
	now := time.Unix(ts, 0)
	body := `{"id":"evt_npm_1","type":"invoice.paid","data":{"note":"naïve café ☕ \u2028 <&>"}}`

	type tc struct {
		name    string
		req     npmSignRequest
		secrets []string // verify with these; the signing secret is among them unless want is set
		want    error
		wantD   Delivery
	}
	var cases []tc
	for _, scheme := range []string{"github", "stripe", "standard"} {
		current, err := NewSecret(scheme)
		if err != nil {
			t.Fatal(err)
		}
		previous, err := NewSecret(scheme)
		if err != nil {
			t.Fatal(err)
		}
		ok := Delivery{ID: "dlv_" + scheme, EventType: "invoice.paid", TrustMode: TrustSigned}
		switch scheme {
		case "stripe":
			ok.ID = "evt_npm_1" // Stripe's id is the body's
		case "github":
			ok.ReplayKey = sha256.Sum256([]byte(body)) // GitHub's id is not signed
		}
		req := npmSignRequest{Scheme: scheme, Secret: current, Body: body, Timestamp: ts, ID: "dlv_" + scheme, Event: "invoice.paid"}
		prevReq := req
		prevReq.Secret = previous
		rotated := ok
		rotated.Secret = 1
		cases = append(cases,
			tc{scheme + "/minted secret", req, []string{current, previous}, nil, ok},
			tc{scheme + "/previous secret", prevReq, []string{current, previous}, nil, rotated},
			tc{scheme + "/other secret", req, []string{previous}, ErrBadSignature, Delivery{}},
		)
		if scheme != "github" {
			stale := req
			stale.Timestamp = ts - 301
			future := req
			future.Timestamp = ts + 301
			cases = append(cases,
				tc{scheme + "/stale", stale, []string{current}, ErrTimestamp, Delivery{}},
				tc{scheme + "/future", future, []string{current}, ErrTimestamp, Delivery{}},
			)
		}
	}
	cases = append(cases,
		tc{"github/published vector", npmSignRequest{Scheme: "github", Secret: githubDocSecret, Body: githubDocBody, Timestamp: ts},
			[]string{githubDocSecret}, nil, Delivery{ReplayKey: sha256.Sum256([]byte(githubDocBody)), TrustMode: TrustSigned}},
		tc{"stripe/hand-computed vector", npmSignRequest{Scheme: "stripe", Secret: stripeVectorSecret, Body: stripeVectorBody, Timestamp: ts},
			[]string{stripeVectorSecret}, nil, Delivery{ID: "evt_1OjD3k2eZvKYlo2C0a1b2c3d", EventType: "payment_intent.succeeded", TrustMode: TrustSigned}},
		tc{"standard/published vector", npmSignRequest{Scheme: "standard", Secret: standardVectorSecret, Body: standardVectorBody, Timestamp: ts, ID: standardVectorID},
			[]string{standardVectorSecret}, nil, Delivery{ID: standardVectorID, TrustMode: TrustSigned}},
	)

	reqs := make([]npmSignRequest, len(cases))
	for i, c := range cases {
		reqs[i] = c.req
	}
	signed := sign(reqs)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range signed[i] {
				h.Set(k, v)
			}
			d, err := Verify(c.req.Scheme, c.secrets, h, []byte(c.req.Body), now)
			checkVerify(t, d, err, c.want, c.wantD)
			if c.want != nil {
				return
			}
			// The same headers must not carry a changed body.
			tampered := []byte(c.req.Body + " ")
			if _, err := Verify(c.req.Scheme, c.secrets, h, tampered, now); !errors.Is(err, ErrBadSignature) {
				t.Fatalf("tampered body: err = %v, want ErrBadSignature", err)
			}
		})
	}

	// The published vectors, signed by the libraries at their own
	// timestamps, must give the published signatures: this pins sign.mjs to
	// the right library functions, and our Stripe vector to stripe-node.
	vec := sign([]npmSignRequest{
		{Scheme: "github", Secret: githubDocSecret, Body: githubDocBody},
		{Scheme: "stripe", Secret: stripeVectorSecret, Body: stripeVectorBody, Timestamp: stripeVectorTS},
		{Scheme: "standard", Secret: standardVectorSecret, Body: standardVectorBody, Timestamp: 1614265330, ID: standardVectorID},
	})
	for i, want := range []struct{ header, value string }{
		{"X-Hub-Signature-256", githubDocSig},
		{"Stripe-Signature", "t=1700000000,v1=" + stripeVectorSig},
		{"webhook-signature", standardVectorSig},
	} {
		if got := vec[i][want.header]; got != want.value {
			t.Errorf("%s from the npm signer = %q, want %q", want.header, got, want.value)
		}
	}
}
