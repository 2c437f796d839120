package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/store"
)

const webhookSynopsis = `webhook create --source TYPE --queue Q [--description D] [--endpoint ID] [--secret-stdin] [--base-url URL] [--json] [--db FILE]
       switchboard webhook list [--all] [--endpoint ID] [--base-url URL] [--json] [--db FILE]
       switchboard webhook rotate ID [--grace DURATION] [--secret-stdin] [--base-url URL] [--json] [--db FILE]
       switchboard webhook delete ID [--db FILE]
       switchboard webhook update ID --rules JSON [--json] [--db FILE]   (rules: docs/flow-control.md; '{}' removes them)
       switchboard webhook events [ID] [--limit N] [--before EVENT_ID] [--json] [--db FILE]
  (events lists stored deliveries, newest first: every webhook's, or webhook ID's;
   create and rotate seal the secret with SWITCHBOARD_SECRET_ENCRYPTION_KEY or --secret-key-file when set,
   and during a key rotation also take the old key as --previous-secret-key-file;
   ingest URLs use SWITCHBOARD_BASE_URL or --base-url; --secret-stdin takes the producer's own secret,
   e.g. the whsec_… Stripe shows or Slack's signing secret, from stdin instead of minting one)`

// defaultRotationGrace is how long a rotated-out secret still verifies, like
// Stripe's roll: long enough to update the producer without dropping deliveries.
const defaultRotationGrace = 24 * time.Hour

// baseURL is the public URL ingest URLs start with: --base-url (whose default
// is SWITCHBOARD_BASE_URL), else serve's listen address.
func baseURL(env *environ, flagValue string) (string, error) {
	if flagValue == "" {
		return "http://" + envOr(env, "SWITCHBOARD_LISTEN", "127.0.0.1:8080"), nil
	}
	if err := ingest.CheckBaseURL(flagValue); err != nil {
		return "", usageErr("--base-url: %v", err)
	}
	return flagValue, nil
}

func runWebhook(ctx context.Context, env *environ, args []string) error {
	return dispatch(ctx, env, args, webhookSynopsis, subcommand{"create", webhookCreate},
		subcommand{"list", webhookList}, subcommand{"rotate", webhookRotate}, subcommand{"delete", webhookDelete},
		subcommand{"events", webhookEvents}, subcommand{"update", webhookUpdate})
}

// webhookView is a webhook as the CLI prints it.
type webhookView struct {
	store.Webhook
	IngestURL     string `json:"ingest_url"`
	SigningSecret string `json:"signing_secret,omitempty"`
}

func webhookCreate(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "webhook create", webhookSynopsis)
	db := dbFlag(fs, env)
	source := fs.String("source", "", "source type: "+strings.Join(store.SourceTypes(), ", ")+" (required)")
	queue := fs.String("queue", "", "queue its deliveries go to (required)")
	desc := fs.String("description", "", "what the webhook is for")
	endpoint := fs.Int64("endpoint", 0, "endpoint (agent) the webhook belongs to; it then counts toward no ceiling")
	base := fs.String("base-url", envOr(env, "SWITCHBOARD_BASE_URL", ""), "public URL of this server (env SWITCHBOARD_BASE_URL)")
	fromStdin := fs.Bool("secret-stdin", false, "read the producer's own signing secret from stdin (Stripe and Slack mint theirs) instead of minting one")
	asJSON := fs.Bool("json", false, "print JSON")
	var keys keyFiles
	secretKeyFlags(fs, env, &keys)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := store.CheckSourceTypes(*source); err != nil {
		return usageErr("--source must be one of %s", strings.Join(store.SourceTypes(), ", "))
	}
	ingestBase, err := baseURL(env, *base)
	if err != nil {
		return err
	}
	if !store.ValidQueueName(*queue) {
		return usageErr("--queue %q is not a valid queue name (letters, digits and . _ - : /)", *queue)
	}
	s, err := openKeyedStore(ctx, env, *db, keys, false)
	if err != nil {
		return err
	}
	defer s.Close()
	if *endpoint != 0 {
		if _, err := s.Endpoint(ctx, *endpoint); err != nil {
			return err
		}
	}
	secret, err := webhookSecret(ctx, env, *source, *fromStdin)
	if err != nil {
		return err
	}
	h, err := s.CreateWebhook(ctx, store.NewWebhook{SourceType: *source, Queue: *queue, Description: *desc,
		Secret: secret, CreatedBy: "human:cli", EndpointID: *endpoint})
	if err != nil {
		return err
	}
	return printSecretOnce(env, webhookView{h, ingest.URL(ingestBase, h.Token), shownSecret(secret, *fromStdin)}, *asJSON, "created")
}

// webhookSecret mints a secret, or reads the producer's own from stdin: Stripe and
// Slack issue their signing secrets and accept none from outside. A read secret
// must be one the scheme can sign with, so a paste error fails here, not as a
// stream of 401s later.
func webhookSecret(ctx context.Context, env *environ, source string, fromStdin bool) (string, error) {
	if !fromStdin {
		secret, _, err := ingest.SecretFor(source, nil)
		return secret, err
	}
	line, err := readSecret(ctx, env, "Signing secret")
	if err != nil {
		return "", usageErr("--secret-stdin: %v", err)
	}
	given := strings.TrimSpace(line)
	secret, _, err := ingest.SecretFor(source, &given)
	if err != nil {
		return "", usageErr("--secret-stdin: %v", err)
	}
	return secret, nil
}

// shownSecret is what the create/rotate output shows: nothing for a secret the
// human brought (they already hold it, and echoing it helps no one).
func shownSecret(secret string, fromStdin bool) string {
	if fromStdin {
		return ""
	}
	return secret
}

func printSecretOnce(env *environ, v webhookView, asJSON bool, verb string) error {
	if asJSON {
		return writeJSON(env, v)
	}
	fmt.Fprintf(env.stdout, "webhook %d %s (%s → queue %s)\n", v.ID, verb, v.SourceType, v.Queue)
	fmt.Fprintf(env.stdout, "ingest URL:     %s\n", v.IngestURL)
	if v.SigningSecret == "" {
		fmt.Fprintln(env.stdout, "signing secret: the one read from stdin. Paste the URL into the producer's webhook settings.")
	} else {
		fmt.Fprintf(env.stdout, "signing secret: %s\n", v.SigningSecret)
		if mints, ok := ingest.Minters[v.SourceType]; ok {
			// Stripe and Slack take no secret from outside: the minted one only
			// signs test deliveries; a real account's secret comes in on stdin.
			fmt.Fprintf(env.stdout, "The secret is shown once. %s mints its own signing secret and takes none from outside: "+
				"this one only verifies deliveries you sign yourself (test tools). For a real %s, paste the URL into %s, "+
				"then hand its secret over: switchboard webhook rotate %d --secret-stdin < secret.txt\n",
				mints.Name, mints.Account, mints.Where, v.ID)
		} else {
			fmt.Fprintln(env.stdout, "The secret is shown once. Paste the URL and the secret into the producer's webhook settings.")
		}
	}
	if !v.SecretEncrypted {
		fmt.Fprintln(env.stdout, "Note: no secret encryption key is configured, so the secret is stored as plaintext.")
	}
	return nil
}

func webhookList(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "webhook list", webhookSynopsis)
	db := dbFlag(fs, env)
	all := fs.Bool("all", false, "include deleted webhooks")
	endpoint := fs.Int64("endpoint", 0, "only this endpoint's webhooks")
	base := fs.String("base-url", envOr(env, "SWITCHBOARD_BASE_URL", ""), "public URL of this server (env SWITCHBOARD_BASE_URL)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	ingestBase, err := baseURL(env, *base)
	if err != nil {
		return err
	}
	s, err := openStoreRO(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	list, err := s.ListWebhooks(ctx, store.WebhookFilter{EndpointID: *endpoint, IncludeDeleted: *all})
	if err != nil {
		return err
	}
	views := make([]webhookView, 0, len(list))
	for _, h := range list {
		v := webhookView{Webhook: h}
		if h.DeletedAt == nil {
			v.IngestURL = ingest.URL(ingestBase, h.Token)
		}
		views = append(views, v)
	}
	none := "no live webhooks (--all lists deleted ones too)"
	if *all {
		none = "no webhooks yet: switchboard webhook create --source S --queue Q makes one"
	}
	return printList(env, *asJSON, views, table[webhookView]{none: none, row: webhookRow,
		header: "ID\tSOURCE\tQUEUE\tENDPOINT\tCREATED BY\tSECRET\tINGEST URL\tSTATUS"})
}

// webhookRow is v's row in webhook list.
func webhookRow(v webhookView) string {
	status, secret := "active", "plaintext"
	if v.DeletedAt != nil {
		status, secret = "deleted", "-"
	} else if v.PreviousExpiresAt != nil && v.PreviousExpiresAt.After(time.Now()) {
		status = "rotating until " + v.PreviousExpiresAt.Local().Format(time.DateTime)
	}
	if v.SecretEncrypted {
		secret = "encrypted"
	}
	ep := "-"
	if v.EndpointID != 0 {
		ep = strconv.FormatInt(v.EndpointID, 10)
	}
	return fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s", v.ID, v.SourceType, v.Queue, ep, v.CreatedBy, secret,
		dash(v.IngestURL), status)
}

// webhookEvents lists stored deliveries, for a human finding out whether a
// producer's deliveries arrive (a rejected one is not stored: serve's log and
// /metrics count those).
func webhookEvents(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "webhook events", webhookSynopsis)
	db := dbFlag(fs, env)
	limit := fs.Int("limit", 50, "at most this many events (max 200)")
	before := fs.Int64("before", 0, "only events older than this event id (the next page)")
	asJSON := fs.Bool("json", false, "print JSON")
	var webhookID int64
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		id, rest, err := leadingID(fs, "webhook", args)
		if err != nil {
			return err
		}
		webhookID, args = id, rest
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *limit < 1 || *limit > 200 {
		return usageErr("--limit must be between 1 and 200")
	}
	if *before < 0 {
		return usageErr("--before must be an event id")
	}
	s, err := openStoreRO(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	if webhookID != 0 {
		if _, err := s.Webhook(ctx, webhookID); err != nil {
			return err
		}
	}
	// One more than asked says whether there is an older page.
	events, err := s.ListWebhookEvents(ctx, store.EventFilter{WebhookID: webhookID, Before: *before, Limit: *limit + 1})
	if err != nil {
		return err
	}
	events, older := store.PageOf(events, *limit)
	none := "no deliveries stored"
	if *before > 0 {
		none = fmt.Sprintf("no deliveries stored before event %d", *before)
	}
	err = printList(env, *asJSON, events, table[store.WebhookEvent]{none: none, row: eventRow,
		header: "EVENT\tWEBHOOK\tSOURCE\tRECEIVED\tDELIVERY ID\tEVENT TYPE\tSIZE\tTRUST\tTODO"})
	if err != nil || *asJSON {
		return err
	}
	if older != 0 {
		fmt.Fprintf(env.stdout, "older: --before %d\n", older)
	}
	return nil
}

// eventRow is e's row in webhook events; what the producer sent is escaped.
func eventRow(e store.WebhookEvent) string {
	todo := "-"
	switch {
	case e.TodoID != 0:
		todo = strconv.FormatInt(e.TodoID, 10)
	case e.Filtered:
		todo = "filtered" // a rule dropped it; "-" is a todo retention pruned
	}
	return fmt.Sprintf("%d\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s", e.ID, e.WebhookID, e.SourceType,
		e.ReceivedAt.Local().Format(time.DateTime), dash(printable(e.DeliveryID)), dash(printable(e.EventType)),
		e.PayloadSize, e.TrustMode, todo)
}

func webhookRotate(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "webhook rotate", webhookSynopsis)
	db := dbFlag(fs, env)
	grace := fs.Duration("grace", defaultRotationGrace, "how long the old secret still verifies (0: not at all)")
	base := fs.String("base-url", envOr(env, "SWITCHBOARD_BASE_URL", ""), "public URL of this server (env SWITCHBOARD_BASE_URL)")
	fromStdin := fs.Bool("secret-stdin", false, "read the producer's new signing secret from stdin (after rolling it at Stripe or Slack)")
	asJSON := fs.Bool("json", false, "print JSON")
	var keys keyFiles
	secretKeyFlags(fs, env, &keys)
	id, rest, err := leadingID(fs, "webhook", args)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if *grace < 0 {
		return usageErr("--grace must not be negative")
	}
	ingestBase, err := baseURL(env, *base)
	if err != nil {
		return err
	}
	// The webhook must already be stored: a mistyped --db is reported, not created.
	s, err := openKeyedStore(ctx, env, *db, keys, true)
	if err != nil {
		return err
	}
	defer s.Close()
	h, err := s.Webhook(ctx, id)
	if err != nil {
		return err
	}
	secret, err := webhookSecret(ctx, env, h.SourceType, *fromStdin)
	if err != nil {
		return err
	}
	// Only the secret rotated away from is kept: one still in its grace from
	// an earlier rotation stops verifying now.
	dropped := h.PreviousSecretLive(s.Now())
	if h, err = s.RotateWebhook(ctx, id, 0, secret, *grace, "human:cli"); err != nil {
		return err
	}
	if err := printSecretOnce(env, webhookView{h, ingest.URL(ingestBase, h.Token), shownSecret(secret, *fromStdin)}, *asJSON, "rotated"); err != nil {
		return err
	}
	if !*asJSON && h.PreviousExpiresAt != nil {
		fmt.Fprintf(env.stdout, "The old secret still verifies until %s.\n", h.PreviousExpiresAt.Local().Format(time.DateTime))
	}
	if dropped {
		fmt.Fprintln(env.stderr, "Note: the secret before it, still in its grace from the last rotation, no longer verifies: "+
			"only the one rotated away from is kept.")
	}
	return nil
}

func webhookDelete(ctx context.Context, env *environ, args []string) error {
	return onID(ctx, env, args, "webhook delete", webhookSynopsis, "webhook",
		func(ctx context.Context, s *store.Store, id int64) error {
			if err := s.DeleteWebhook(ctx, id, 0, "human:cli"); err != nil {
				if errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("webhook %d: unknown or already deleted", id)
				}
				return err
			}
			fmt.Fprintf(env.stdout, "webhook %d deleted; its URL answers 404 from now on\n", id)
			return nil
		})
}
