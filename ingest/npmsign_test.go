package ingest

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// TestSignersFromNPM signs deliveries with @octokit/webhooks-methods, stripe
// and standardwebhooks, using secrets NewSecret minted (so the forms we hand
// out are ones those libraries accept) and the published vectors, and checks
// that Verify accepts exactly what they produce and nothing near it.
func TestSignersFromNPM(t *testing.T) {
	sign := testkit.NPMSigner(t, "npmsign")
	const ts = 1_750_000_000
	now := time.Unix(ts, 0)
	body := `{"id":"evt_npm_1","type":"invoice.paid","data":{"note":"naïve café ☕ \u2028 <&>"}}`

	type tc struct {
		name    string
		req     testkit.NPMSignRequest
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
		req := testkit.NPMSignRequest{Scheme: scheme, Secret: current, Body: body, Timestamp: ts, ID: "dlv_" + scheme, Event: "invoice.paid"}
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
		tc{"github/published vector", testkit.NPMSignRequest{Scheme: "github", Secret: githubDocSecret, Body: githubDocBody, Timestamp: ts},
			[]string{githubDocSecret}, nil, Delivery{ReplayKey: sha256.Sum256([]byte(githubDocBody)), TrustMode: TrustSigned}},
		tc{"stripe/hand-computed vector", testkit.NPMSignRequest{Scheme: "stripe", Secret: stripeVectorSecret, Body: stripeVectorBody, Timestamp: ts},
			[]string{stripeVectorSecret}, nil, Delivery{ID: "evt_1OjD3k2eZvKYlo2C0a1b2c3d", EventType: "payment_intent.succeeded", TrustMode: TrustSigned}},
		tc{"standard/published vector", testkit.NPMSignRequest{Scheme: "standard", Secret: standardVectorSecret, Body: standardVectorBody, Timestamp: ts, ID: standardVectorID},
			[]string{standardVectorSecret}, nil, Delivery{ID: standardVectorID, TrustMode: TrustSigned}},
	)

	reqs := make([]testkit.NPMSignRequest, len(cases))
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
	vec := sign([]testkit.NPMSignRequest{
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
