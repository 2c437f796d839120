package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/store"
)

// webhookUpdate sets a webhook's rules on an operator's word (any webhook, an
// agent's too): checked as create_webhook and update_webhook check them, and
// applied from the webhook's next delivery, by a running serve too.
func webhookUpdate(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "webhook update", webhookSynopsis)
	db := dbFlag(fs, env)
	rulesArg := fs.String("rules", "", `the rules as JSON, e.g. '{"filter": {"actions": ["opened"]}}' ('{}' removes them; required)`)
	asJSON := fs.Bool("json", false, "print JSON")
	id, rest, err := leadingID(fs, "webhook", args)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	if !flagSet(fs, "rules") {
		return usageErr("--rules is required ('{}' removes the rules)")
	}
	r, err := ingest.ParseNewRules([]byte(*rulesArg))
	if err != nil {
		return usageErr("--rules: %s", ingest.RulesMessage(err))
	}
	var rules []byte
	if r != nil {
		if rules, err = json.Marshal(r); err != nil {
			return err
		}
	}
	s, err := openExisting(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	h, err := s.SetWebhookRules(ctx, id, 0, rules, "human:cli")
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("webhook %d: unknown or deleted", id)
	}
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env, h)
	}
	if r == nil {
		fmt.Fprintf(env.stdout, "webhook %d: rules removed; every delivery makes a todo\n", id)
	} else {
		fmt.Fprintf(env.stdout, "webhook %d: rules set, from its next delivery: %s\n", id, rules)
	}
	return nil
}
