package agent

// Verb names are a contract with agents and with the endpoint scopes operators
// grant. Each names a tool of the verb table; the lists of them (which verbs work
// the queue, which an endpoint may be granted) are the store's: store.TodoVerbs(),
// store.WebhookVerbs(), store.AllVerbs.
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
	VerbRequestApproval = "request_approval"

	VerbCreateWebhook      = "create_webhook"
	VerbListWebhooks       = "list_webhooks"
	VerbRotateWebhook      = "rotate_webhook"
	VerbDeleteWebhook      = "delete_webhook"
	VerbListWebhookEvents  = "list_webhook_events"
	VerbGetWebhookEvent    = "get_webhook_event"
	VerbReplayWebhookEvent = "replay_webhook_event"
	VerbUpdateWebhook      = "update_webhook"
)
