package agent

import (
	"fmt"
	"strings"

	"github.com/switchboardhq/switchboard/store"
)

// The texts below state the lease contract to the model. Every number in them comes
// from DefaultLeaseSeconds, MaxLeaseSeconds and the endpoint's default lease, so
// the contract stated is the contract enforced (lease_test.go pins this).

// leaseSentence states how long a lease is, for an endpoint whose default lease is
// endpointDefault seconds (0 = not set).
func leaseSentence(endpointDefault int) string {
	if endpointDefault > 0 {
		return fmt.Sprintf("A claim holds the todo under a lease of %d seconds (this endpoint's default; the built-in default is %d) "+
			"unless you pass lease_ttl_seconds, at most %d (longer values are cut to %d).",
			effectiveDefault(endpointDefault), DefaultLeaseSeconds, MaxLeaseSeconds, MaxLeaseSeconds)
	}
	return fmt.Sprintf("A claim holds the todo under a lease of %d seconds unless you pass lease_ttl_seconds, "+
		"at most %d (longer values are cut to %d).", DefaultLeaseSeconds, MaxLeaseSeconds, MaxLeaseSeconds)
}

// leaseRules is what a worker must do to keep a lease, and what losing one means.
const leaseRules = "Call heartbeat before the lease runs out and before any irreversible step (merging, sending, paying). " +
	"If the lease lapses the todo is requeued for another worker, and heartbeat, complete and fail answer conflict, " +
	"even before anyone else has claimed it: on conflict, stop work on that todo and take no irreversible step for it. " +
	"If you cannot call heartbeat, claim with a lease_ttl_seconds that covers the whole job."

// leaseSeqRule is who may act on a claim without naming its lease (see Call.ack).
const leaseSeqRule = "Without lease_seq, only the session that made the claim may act on it: any other session " +
	"(a new one after a reconnect or a restart of Switchboard among them) gets conflict."

// sessionInstructions is the text a session of ep reads before its first call: the
// todo loop and its lease contract, or, for an endpoint that works no queues (an
// agent of capability modules alone), what it may do instead.
func sessionInstructions(ep store.Endpoint) string {
	if len(ep.Queues) > 0 {
		return instructions(ep.DefaultLeaseTTL) + approvalInstructions(ep) + "\n\n" + webhookInstructions(ep)
	}
	return "This endpoint works no queues of Switchboard's: its tools are those of the capability modules granted it (" +
		strings.Join(ep.Capabilities, ", ") + "), named module_tool. Call them as any MCP tool. When Switchboard, not " +
		"the module, refuses a call, the result has isError and says why with a code and a message: unavailable (the " +
		"module is down or did not answer in time, or the tool awaits a human's approval: retry later; or the module " +
		"failed the call: the message says how), invalid_argument, forbidden, rate_limited (retry shortly) or not_found."
}

// statelessInstructions is what server/discover tells a client of the stateless
// revision of ep: the session's text, and that it keeps no session, so lease_seq
// is never optional there.
func statelessInstructions(ep store.Endpoint) string {
	s := sessionInstructions(ep)
	if len(ep.Queues) == 0 {
		return s
	}
	return s + "\n\nProtocol version " + statelessVersion + " keeps no session: every request stands alone, so pass " +
		"lease_seq to heartbeat, complete, fail and release every time. For the wake-up, call subscriptions/listen " +
		"with notifications {\"claude/channel\": {}} (or {\"queues\": [...]} for some of your queues), or declare the " +
		"experimental claude/channel capability."
}

// instructions is the text every session reads before its first call.
func instructions(endpointDefault int) string {
	return "Switchboard hands you todos from the queues this endpoint may work. " +
		"Loop: call claim_next (or claim a todo by id), do the work, then call complete with a short result, " +
		"or fail with an error (retry=true puts it back after a backoff; retry=false, or the last attempt, dead-letters it). " +
		"release hands a todo back at once. To save a call, pass claim_next=true to complete or fail: once that todo is " +
		"stored, your next one is claimed as claim_next would claim it (under the default lease), and the answer's next " +
		"holds what claim_next answers, its lease_seq included. A script that works todos in batches may pass max to " +
		"claim_next to claim several at once: the answer lists them in claims, each under a lease of its own, with its " +
		"own lease_seq, that lapses alone; heartbeat each one you are still working on.\n\n" +
		"Lease contract: " + leaseSentence(endpointDefault) + " " + leaseRules + " " +
		"A heartbeat without lease_ttl_seconds extends the lease by the endpoint default and never shortens a longer lease. " +
		"Pass the lease_seq from your claim to heartbeat, complete, fail and release, so that a lease you lost " +
		"can never act on a todo another worker holds now. " + leaseSeqRule + "\n\n" +
		"Only claim, claim_next and the next of a complete or fail return a todo's payload; list_todos and every acknowledgement return compact rows " +
		"with payload_size instead. payload_encoding says how to read the payload: utf-8 as it is, or base64 for a " +
		"payload that is not UTF-8 text (a binary webhook body). A notifications/claude/channel message (\"todo N ready on queue Q\") is only a " +
		"wake-up: it may be missed, so call claim_next when you start and after each todo, until it says nothing is claimable.\n\n" +
		keyRule
}

// keyRule is what a worker needs to know of keys and priorities: nothing changes
// in the loop, but a keyed todo held is a key held.
const keyRule = "claim_next takes the highest priority first, then the oldest. Todos that share a key (a todo's key, " +
	"such as octo/repo#42) are claimed one at a time, in order: the next one of its key waits until you complete " +
	"or dead-letter the one you hold, so finish or release a keyed todo promptly. coalesced says how many later " +
	"todos of its key were folded into this one: its payload is the newest."

// leaseTTLSchemaText describes the lease_ttl_seconds argument.
func leaseTTLSchemaText(endpointDefault int) string {
	return fmt.Sprintf("Lease length in seconds, 1 to %d (longer values are cut to %d). Default: %d seconds (%s).",
		MaxLeaseSeconds, MaxLeaseSeconds, effectiveDefault(endpointDefault), defaultSource(endpointDefault))
}

func defaultSource(endpointDefault int) string {
	if endpointDefault > 0 {
		return "this endpoint's default"
	}
	return "built in"
}

func claimDescription(endpointDefault int) string {
	return "Claim one pending todo by id. Returns the full todo with its payload, and lease_seq: pass it to " +
		"heartbeat, complete, fail and release. " + leaseSeqRule + " " + leaseSentence(endpointDefault) + " " + leaseRules
}

func claimNextDescription(endpointDefault int) string {
	return "Claim the next claimable todo in your queues (or in one queue you name): the highest priority, then the " +
		"oldest, skipping todos whose key another claim holds. Returns the full todo with " +
		"its payload and lease_seq, or claimed=false when nothing is claimable (not an error). With max, up to that " +
		"many todos, listed in claims, each under its own lease with its own lease_seq. " + leaseSeqRule + " " +
		leaseSentence(endpointDefault) + " " + leaseRules
}

func heartbeatDescription(endpointDefault int) string {
	return fmt.Sprintf("Extend the lease on a todo you hold to now + lease_ttl_seconds (default %d seconds, %s). "+
		"A heartbeat never shortens a longer lease already granted, and it cannot revive a lapsed one: "+
		"it answers conflict, and then you must stop work on that todo. ",
		effectiveDefault(endpointDefault), defaultSource(endpointDefault)) + leaseSentence(endpointDefault) + " " + leaseRules
}
