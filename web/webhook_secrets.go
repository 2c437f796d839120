package web

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/store"
)

// Creating and rotating a webhook end on a page that shows its signing secret
// once, as the CLI's create and rotate do: Switchboard must keep the secret
// recoverable to verify signatures, but it never shows it again.

// graces are the rotation grace periods the form offers, the first (the CLI's
// default) preselected.
var graces = []struct {
	Value, Label string
}{{"24h", "24 hours"}, {"1h", "1 hour"}, {"168h", "7 days"}, {"0s", "none: the old secret stops at once"}}

type webhookSecretPage struct {
	Hook   webhookRow
	Verb   string // "created" or "rotated"
	Secret string // "" when the operator brought the producer's own
	// Mints names the producer (Stripe, Slack) that will not take Secret.
	Mints string
	Grace string // how long the old secret still verifies, after a rotation
}

// webhookSecret mints a secret for source, or checks the one the operator pasted
// (the producer's own), so that a paste error shows here, not as a stream of 401s.
func webhookSecret(source, pasted string) (secret string, minted bool, msg string) {
	var given *string
	if p := strings.TrimSpace(pasted); p != "" {
		given = &p
	}
	secret, minted, err := ingest.SecretFor(source, given)
	switch {
	case err != nil && given == nil:
		return "", false, fmt.Sprintf("Minting a secret failed: %v.", err)
	case err != nil:
		return "", false, fmt.Sprintf("The signing secret was refused: %v.", err)
	}
	return secret, minted, ""
}

// createWebhook serves POST /webhooks: a new ingest URL owned by the operators (no
// endpoint's ceiling), its secret shown once. A refused form comes back filled
// in, with the reason.
func (u *UI) createWebhook(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	u.secretOnce(w, r, rc, func() (webhookSecretPage, bool) {
		f := webhookForm{Open: true, Source: r.PostForm.Get("source"), Queue: strings.TrimSpace(r.PostForm.Get("queue")),
			Description: strings.TrimSpace(r.PostForm.Get("description"))}
		refuse := func(msg string) (webhookSecretPage, bool) {
			u.showWebhooks(w, r, rc, http.StatusBadRequest, f, msg)
			return webhookSecretPage{}, false
		}
		// Asked before a secret is minted for it.
		if err := store.CheckSourceTypes(f.Source); err != nil {
			return refuse(fmt.Sprintf("Pick a source type: %s.", strings.Join(store.SourceTypes(), ", ")))
		}
		if !store.ValidQueueName(f.Queue) {
			return refuse(fmt.Sprintf("%q is not a valid queue name: use 1-128 letters, digits and . _ - : / (starting with a letter or digit).", f.Queue))
		}
		secret, minted, msg := webhookSecret(f.Source, r.PostForm.Get("signing_secret"))
		if msg != "" {
			return refuse(msg)
		}
		h, err := u.store.CreateWebhook(r.Context(), store.NewWebhook{SourceType: f.Source, Queue: f.Queue, Description: f.Description,
			Secret: secret, CreatedBy: rc.actor()})
		if errorsIs(err, store.ErrInvalid) {
			return refuse("The webhook was refused: " + plainError(err) + ".")
		}
		if err != nil {
			u.storeError(w, r, rc, "Creating the webhook", err)
			return webhookSecretPage{}, false
		}
		return secretPage(u.webhookRow(r, h), "created", "", secret, minted), true
	})
}

// rotateWebhook serves POST /webhook/:id/rotate: a new secret (minted, or the
// producer's own after rolling it there), the old one valid for the grace picked.
func (u *UI) rotateWebhook(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	u.secretOnce(w, r, rc, func() (webhookSecretPage, bool) {
		id, ok := pathID(rc, "id")
		if !ok {
			u.fail(w, r, rc, http.StatusNotFound, "There is no such webhook.")
			return webhookSecretPage{}, false
		}
		f := webhookForm{Open: true, Grace: r.PostForm.Get("grace")}
		refuse := func(msg string) (webhookSecretPage, bool) {
			u.showWebhook(w, r, rc, id, http.StatusBadRequest, f, msg)
			return webhookSecretPage{}, false
		}
		grace, err := time.ParseDuration(f.Grace)
		if err != nil || grace < 0 || grace > 30*24*time.Hour {
			return refuse("Pick how long the old secret keeps verifying.")
		}
		h, err := u.store.Webhook(r.Context(), id)
		if err != nil {
			u.storeError(w, r, rc, fmt.Sprintf("Webhook %d", id), err)
			return webhookSecretPage{}, false
		}
		secret, minted, msg := webhookSecret(h.SourceType, r.PostForm.Get("signing_secret"))
		if msg != "" {
			return refuse(msg)
		}
		if h, err = u.store.RotateWebhook(r.Context(), id, 0, secret, grace, rc.actor()); err != nil {
			u.storeError(w, r, rc, fmt.Sprintf("Rotating webhook %d", id), err)
			return webhookSecretPage{}, false
		}
		old := "stops verifying at once"
		if grace > 0 {
			old = "keeps verifying for " + graceLabel(grace)
		}
		return secretPage(u.webhookRow(r, h), "rotated", old, secret, minted), true
	})
}

// secretPage is what the page after a create or rotate shows: the secret only if
// Switchboard minted it (one the operator pasted is not shown back).
func secretPage(h webhookRow, verb, grace, secret string, minted bool) webhookSecretPage {
	p := webhookSecretPage{Hook: h, Verb: verb, Grace: grace}
	if minted {
		p.Secret, p.Mints = secret, ingest.Minters[h.SourceType].Name
	}
	return p
}

func (u *UI) showSecret(w http.ResponseWriter, r *http.Request, rc *reqCtx, p webhookSecretPage) {
	u.render(w, r, rc, http.StatusOK, "webhook_secret", view{Title: fmt.Sprintf("Webhook %d %s", p.Hook.ID, p.Verb),
		Nav: "webhooks", Page: p})
}

// graceLabel is the form's label for d, or d itself.
func graceLabel(d time.Duration) string {
	for _, g := range graces {
		if v, err := time.ParseDuration(g.Value); err == nil && v == d {
			return g.Label
		}
	}
	return d.String()
}
