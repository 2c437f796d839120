package agent

// Verb names are a contract with agents and with the endpoint scopes humans grant.
const (
	VerbListTodos       = "list_todos"
	VerbClaim           = "claim"
	VerbClaimNext       = "claim_next"
	VerbHeartbeat       = "heartbeat"
	VerbComplete        = "complete"
	VerbFail            = "fail"
	VerbRelease         = "release"
	VerbGetDefaultLease = "get_default_lease"
	VerbSetDefaultLease = "set_default_lease"

	VerbCreateWebhook      = "create_webhook"
	VerbListWebhooks       = "list_webhooks"
	VerbRotateWebhook      = "rotate_webhook"
	VerbDeleteWebhook      = "delete_webhook"
	VerbListWebhookEvents  = "list_webhook_events"
	VerbGetWebhookEvent    = "get_webhook_event"
	VerbReplayWebhookEvent = "replay_webhook_event"
)

// TodoVerbs are the verbs that work the queue.
var TodoVerbs = []string{VerbListTodos, VerbClaim, VerbClaimNext, VerbHeartbeat, VerbComplete, VerbFail,
	VerbRelease, VerbGetDefaultLease, VerbSetDefaultLease}

// WebhookVerbs are the self-service webhook and event-history verbs.
var WebhookVerbs = []string{VerbCreateWebhook, VerbListWebhooks, VerbRotateWebhook, VerbDeleteWebhook,
	VerbListWebhookEvents, VerbGetWebhookEvent, VerbReplayWebhookEvent}

// AllVerbs is every verb, and the default grant of a new endpoint.
func AllVerbs() []string {
	return append(append([]string{}, TodoVerbs...), WebhookVerbs...)
}

// KnownVerb reports whether v names a verb.
func KnownVerb(v string) bool {
	for _, k := range AllVerbs() {
		if k == v {
			return true
		}
	}
	return false
}
