package agent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/switchboardhq/switchboard/store"
)

// WebhookGrant says in a few words whether ep's agent may create webhooks for
// itself, and under what ceiling, as `endpoint list` and the board show it: an
// endpoint made with the Quick start's flags may not, and nothing else says so.
func WebhookGrant(ep store.Endpoint) string {
	switch {
	case !slices.Contains(ep.Verbs, VerbCreateWebhook):
		return "none (create_webhook not granted)"
	case ep.Ceiling.MaxWebhooks == 0:
		return "none (ceiling 0)"
	case len(ep.Ceiling.Sources) == 0:
		return fmt.Sprintf("none (up to %d, but no source type allowed)", ep.Ceiling.MaxWebhooks)
	}
	return fmt.Sprintf("up to %d: %s", ep.Ceiling.MaxWebhooks, strings.Join(ep.Ceiling.Sources, ","))
}

// webhookInstructions tells a session whether it may create webhooks and, when
// it may not, which of the endpoint's settings a human changes to grant it, so
// that an agent asked to set one up can say what it needs rather than guess.
func webhookInstructions(ep store.Endpoint) string {
	update := fmt.Sprintf("switchboard endpoint update %d", ep.ID)
	board := " (or on the endpoint's page of the board); your tools list then changes (tools/list_changed)."
	switch {
	case !slices.Contains(ep.Verbs, VerbCreateWebhook):
		return "Webhooks: create_webhook is not granted to this endpoint. A human grants it by adding it to the " +
			"endpoint's verbs (" + update + " --verbs …)" + board
	case ep.Ceiling.MaxWebhooks == 0:
		return "Webhooks: create_webhook is withheld, because this endpoint's webhook ceiling is 0. A human grants it " +
			"with " + update + " --max-webhooks N --webhook-sources " + strings.Join(store.SourceTypes(), ",") + " " +
			"(the source types to allow)" + board
	case len(ep.Ceiling.Sources) == 0:
		return fmt.Sprintf("Webhooks: this endpoint may create up to %d, but for no source type, so create_webhook "+
			"answers ceiling_exceeded. A human allows source types with %s --webhook-sources github,stripe,…"+
			" (or on the endpoint's page of the board).", ep.Ceiling.MaxWebhooks, update)
	}
	return fmt.Sprintf("Webhooks: you may create up to %d with create_webhook (source types %s; queues %s); past "+
		"that it answers ceiling_exceeded, and a human raises the ceiling.", ep.Ceiling.MaxWebhooks,
		strings.Join(ep.Ceiling.Sources, ", "), listOrNone(ep.Ceiling.Queues))
}
