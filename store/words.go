package store

import (
	"fmt"
	"slices"
	"strings"
)

// The product's word lists live here, once: the store refuses a value outside
// them, and the edges (CLI, board, MCP) ask it and only say the refusal in
// their own words. agent names a tool for each verb and ingest a verifier for
// each source type; their tests hold them to these lists.

// The lists are unexported and handed out as copies, so that no caller can
// widen what the store accepts.
var (
	// todoVerbs work the queue, in the order the board shows them. Verb names
	// are a contract with agents and with the endpoint scopes operators grant.
	todoVerbs = []string{"list_todos", "claim", "claim_next", "heartbeat", "complete", "fail",
		"release", "get_default_lease", "set_default_lease", "request_approval"}
	// webhookVerbs are the self-service webhook and event-history verbs.
	webhookVerbs = []string{"create_webhook", "list_webhooks", "rotate_webhook", "delete_webhook",
		"list_webhook_events", "get_webhook_event", "replay_webhook_event", "update_webhook"}
	// optInVerbs are never granted by default: an operator names them (add_todo
	// lets an agent put work on queues, within Endpoint.AddQueues).
	optInVerbs = []string{"add_todo"}
	// sourceTypes are the webhook source types Switchboard verifies, in the
	// order the UI and docs show them: a contract with agents and operators.
	sourceTypes = []string{"github", "stripe", "slack", "standard", "gitlab", "generic"}
)

// TodoVerbs are the verbs that work the queue.
func TodoVerbs() []string { return slices.Clone(todoVerbs) }

// WebhookVerbs are the self-service webhook and event-history verbs.
func WebhookVerbs() []string { return slices.Clone(webhookVerbs) }

// OptInVerbs are the verbs granted only when an operator names them.
func OptInVerbs() []string { return slices.Clone(optInVerbs) }

// AllVerbs is every verb an endpoint is granted by default: every verb but the
// OptInVerbs. It is a fresh slice each call.
func AllVerbs() []string { return slices.Concat(todoVerbs, webhookVerbs) }

// EveryVerb is every verb, the opt-in ones too: names no module tool may take.
func EveryVerb() []string { return slices.Concat(todoVerbs, webhookVerbs, optInVerbs) }

// KnownVerb reports whether v names a verb.
func KnownVerb(v string) bool {
	return slices.Contains(todoVerbs, v) || slices.Contains(webhookVerbs, v) || slices.Contains(optInVerbs, v)
}

// SourceTypes lists the webhook source types.
func SourceTypes() []string { return slices.Clone(sourceTypes) }

// ValidSourceType reports whether s names a webhook source type.
func ValidSourceType(s string) bool { return slices.Contains(sourceTypes, s) }

// UnknownWordError is a value outside one of the word lists. It is ErrInvalid;
// an edge that words the refusal its own way reads What, Value and Known.
type UnknownWordError struct {
	What  string // WordVerb or WordSourceType
	Value string
	Known []string
}

// The lists an UnknownWordError names.
const (
	WordVerb       = "verb"
	WordSourceType = "webhook source type"
)

func (e *UnknownWordError) Error() string {
	return fmt.Sprintf("unknown %s %q (known: %s)", e.What, e.Value, strings.Join(e.Known, ","))
}

func (e *UnknownWordError) Unwrap() error { return ErrInvalid }

// CheckVerbs returns an *UnknownWordError for the first of verbs that is not one.
func CheckVerbs(verbs []string) error {
	for _, v := range verbs {
		if !KnownVerb(v) {
			return &UnknownWordError{What: WordVerb, Value: v, Known: EveryVerb()}
		}
	}
	return nil
}

// CheckSourceTypes returns an *UnknownWordError for the first of types that is
// not a webhook source type.
func CheckSourceTypes(types ...string) error {
	for _, t := range types {
		if !ValidSourceType(t) {
			return &UnknownWordError{What: WordSourceType, Value: t, Known: SourceTypes()}
		}
	}
	return nil
}
