package agent

import (
	"fmt"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/store"
)

// The definitions of the todo and lease verbs' tools: their arguments and the
// schema each shows an agent.

// Arguments shared by the verbs that act on a claimed todo.

func todoIDArg() mcp.ToolOption {
	return mcp.WithInteger("todo_id", mcp.Required(), mcp.Min(1), mcp.Description("The todo's id."))
}

func leaseSeqArg() mcp.ToolOption {
	return mcp.WithInteger("lease_seq", mcp.Min(1), mcp.Description(
		"The lease_seq your claim returned. With it, an acknowledgement from a lease you lost answers conflict "+
			"even if the todo was claimed again by a worker with the same credential. "+leaseSeqRule))
}

func leaseTTLArg(ep store.Endpoint) mcp.ToolOption {
	return mcp.WithInteger("lease_ttl_seconds", mcp.Min(1), mcp.Description(leaseTTLSchemaText(ep.DefaultLeaseTTL)))
}

func queueArg(ep store.Endpoint, what string) mcp.ToolOption {
	opts := []mcp.PropertyOption{mcp.Description(what)}
	if len(ep.Queues) > 0 {
		opts = append(opts, mcp.Enum(ep.Queues...))
	}
	return mcp.WithString("queue", opts...)
}

var closed = mcp.WithSchemaAdditionalProperties(false)

// claimNextArg is complete's and fail's option to claim the next todo in the same call.
func claimNextArg() mcp.ToolOption {
	return mcp.WithBoolean("claim_next", mcp.DefaultBool(false), mcp.Description("After this todo is stored, claim your next "+
		"one as claim_next does (every queue of this endpoint, the default lease); the answer's next holds what claim_next answers."))
}

func defineListTodos(ep store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbListTodos,
		mcp.WithDescription(fmt.Sprintf("List todos in your queues, newest first, as compact rows: payload_size "+
			"instead of the payload (claim a todo to read its payload). Up to %d rows per page (default %d); "+
			"pass next_cursor back as cursor for the next page.", maxPageLimit, defaultPageLimit)),
		queueArg(ep, "Only this queue (default: every queue this endpoint may work)."),
		mcp.WithString("state", mcp.Enum(store.StatePending, store.StateClaimed, store.StateDone, store.StateFailed),
			mcp.Description("Only todos in this state.")),
		limitArg(), cursorArg(),
		closed,
		returns[listResult](),
		annotate("List todos", true, false, true, false),
	)
}

func defineClaim(ep store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbClaim,
		mcp.WithDescription(claimDescription(ep.DefaultLeaseTTL)),
		todoIDArg(), leaseTTLArg(ep), closed,
		returns[claimResult](),
		annotate("Claim a todo", false, false, false, false),
	)
}

func defineClaimNext(ep store.Endpoint) mcp.Tool {
	items := []mcp.PropertyOption{}
	if len(ep.Queues) > 0 {
		items = append(items, mcp.Enum(ep.Queues...))
	}
	return mcp.NewTool(VerbClaimNext,
		mcp.WithDescription(claimNextDescription(ep.DefaultLeaseTTL)),
		queueArg(ep, "Claim only from this queue (default: every queue this endpoint may work)."),
		mcp.WithArray("queues", mcp.WithStringItems(items...), mcp.UniqueItems(true),
			mcp.Description("Claim only from these queues, oldest todo first across them (with queue, from all named).")),
		mcp.WithInteger("max", mcp.Min(1), mcp.Max(MaxClaimsPerCall), mcp.Description(fmt.Sprintf("Claim up to this many "+
			"todos, 1 to %d, each under its own lease (default: one). With max the answer lists them in claims.", MaxClaimsPerCall))),
		leaseTTLArg(ep), closed,
		returns[claimResult](),
		annotate("Claim the next todo", false, false, false, false),
	)
}

func defineHeartbeat(ep store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbHeartbeat,
		mcp.WithDescription(heartbeatDescription(ep.DefaultLeaseTTL)),
		todoIDArg(), leaseSeqArg(), leaseTTLArg(ep), closed,
		// Idempotent: repeating it moves the expiry to the same now+ttl, never shorter.
		returns[ackResult](),
		annotate("Extend a lease", false, false, true, false),
	)
}

func defineComplete(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbComplete,
		mcp.WithDescription("Mark a todo you hold done, with an optional short result. Answers conflict if your "+
			"lease lapsed or the todo is no longer yours. Returns the compact row."),
		todoIDArg(), leaseSeqArg(),
		mcp.WithString("result", mcp.MaxLength(MaxResultBytes),
			mcp.Description(fmt.Sprintf("A short outcome for the record (not a copy of the payload); at most %d bytes.", MaxResultBytes))),
		claimNextArg(), closed,
		// Not destructive: the todo is finished, not deleted; its row stays in the history.
		returns[ackResult](),
		annotate("Complete a todo", false, false, false, false),
	)
}

func defineFail(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbFail,
		mcp.WithDescription("Record that work on a todo you hold failed. With retry (the default) it goes back to "+
			"pending after a backoff; with retry=false, or when its attempts are used up, it is dead-lettered "+
			"(state failed). Answers conflict if your lease lapsed. Returns the compact row."),
		todoIDArg(), leaseSeqArg(),
		mcp.WithString("error", mcp.Required(), mcp.MinLength(1), mcp.MaxLength(MaxErrorBytes),
			mcp.Description(fmt.Sprintf("What went wrong; at most %d bytes.", MaxErrorBytes))),
		mcp.WithBoolean("retry", mcp.DefaultBool(true), mcp.Description("Whether the todo may be tried again.")),
		claimNextArg(), closed,
		returns[ackResult](),
		annotate("Fail a todo", false, false, false, false),
	)
}

func defineRelease(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbRelease,
		mcp.WithDescription("Hand a todo you hold back to its queue at once, without using up an attempt. "+
			"Returns the compact row."),
		todoIDArg(), leaseSeqArg(), closed,
		returns[ackResult](),
		annotate("Release a todo", false, false, false, false),
	)
}

func defineGetDefaultLease(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbGetDefaultLease,
		mcp.WithDescription(fmt.Sprintf("Show this endpoint's default lease: what a claim or heartbeat without "+
			"lease_ttl_seconds gets. Built-in default %d seconds, at most %d.", DefaultLeaseSeconds, MaxLeaseSeconds)),
		closed,
		returns[leaseInfo](),
		annotate("Show the default lease", true, false, true, false),
	)
}

func defineSetDefaultLease(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbSetDefaultLease,
		mcp.WithDescription(fmt.Sprintf("Set this endpoint's default lease in seconds (0 restores the built-in %d). "+
			"It applies to the next claim and heartbeat of every session of this endpoint; their tool "+
			"descriptions are updated (tools/list_changed).", DefaultLeaseSeconds)),
		mcp.WithInteger("default_lease_ttl_seconds", mcp.Required(), mcp.Min(0), mcp.Max(MaxLeaseSeconds),
			mcp.Description(fmt.Sprintf("Seconds, 0 to %d.", MaxLeaseSeconds))),
		closed,
		// Destructive: it overwrites the setting the endpoint's human chose.
		returns[leaseInfo](),
		annotate("Set the default lease", false, true, true, false),
	)
}
