package agent

import (
	"context"
	"encoding/json"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/store"
)

// Webhook rules as agents set them: create_webhook's rules argument and
// update_webhook (see ingest.Rules for what they do).

const rulesText = "Rules for its deliveries (omit for none: every delivery makes a todo). " +
	`filter: {events: provider event types (GitHub X-GitHub-Event, Stripe/Standard type, GitLab X-Gitlab-Event, ` +
	`Slack event type), actions: the body's "action" (GitHub opened, synchronize…), match: {"/json/pointer": value} ` +
	"equalities}; a delivery it drops is still recorded as an event (filtered) and makes no todo. " +
	`key: a template such as "{/repository/full_name}#{/pull_request/number}": one todo of a key is worked at a ` +
	"time, in order. coalesce: true folds a delivery into its key's pending todo. debounce, debounce_max: " +
	`durations ("30s", "5m"): the folded todo waits until no delivery came for debounce, at most debounce_max. ` +
	"priority: -1000 to 1000, higher claimed first."

func rulesArg() mcp.ToolOption {
	return mcp.WithObject("rules", mcp.Description(rulesText))
}

// checkRules reads a rules argument: nil when absent or empty, else the rules
// as the store keeps them.
func checkRules(raw json.RawMessage) ([]byte, error) {
	r, err := ingest.ParseNewRules(raw)
	if err != nil {
		return nil, errorf(CodeInvalidArgument, "%s", ingest.RulesMessage(err))
	}
	if r == nil {
		return nil, nil
	}
	return json.Marshal(r)
}

func defineUpdateWebhook(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbUpdateWebhook,
		mcp.WithDescription("Replace the rules of one of this endpoint's webhooks; they apply from its next "+
			"delivery. An empty object removes them. Returns the webhook."),
		webhookIDArg(),
		mcp.WithObject("rules", mcp.Required(), mcp.Description(rulesText)),
		closed,
		returns[webhookRow](),
		annotate("Update a webhook's rules", false, true, true, false),
	)
}

func (a *Agent) updateWebhook(ctx context.Context, c *Call) (any, error) {
	var in struct {
		WebhookID *int64          `json:"webhook_id"`
		Rules     json.RawMessage `json:"rules"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	id, err := positiveID("webhook_id", in.WebhookID)
	if err != nil {
		return nil, err
	}
	if in.Rules == nil {
		return nil, errorf(CodeInvalidArgument, "rules is required ({} removes them)")
	}
	rules, err := checkRules(in.Rules)
	if err != nil {
		return nil, err
	}
	// Scoped in the store too: another endpoint's webhook, a human's and a
	// deleted one are all not_found, and nothing changes.
	h, err := a.st.SetWebhookRules(ctx, id, c.Endpoint.ID, rules, c.Actor)
	if err != nil {
		return nil, err
	}
	return a.row(h), nil
}
