// Package agent is the MCP endpoint agents work through: Streamable HTTP at /mcp,
// bearer authentication, session binding, scope checks, the todo and lease verbs,
// the session instructions, the doorbell, and rate limits.
//
// It must never hold SQL (every query is a store method), never trust a session id
// without the credential that opened it, and never return a todo's payload except
// from claim and claim_next.
//
// # Request path
//
// An HTTP request passes, in order: the Host check (DNS rebinding), the Origin check,
// the bearer credential (resolved to a live store.Endpoint on every request, so a
// revocation or a scope edit applies to the next request; without one, a verified
// Cloudflare Access assertion resolves the same way, see cfaccess.go), the body bounds (1 MiB
// within 30 s; a request refused before them never has its body read), and the
// session binding (a session id is usable only by the endpoint that opened it).
// Only then does mcp-go see it. A tool call then passes the endpoint's rate limit and
// the verb check, and the handler checks every queue it touches with the same helper
// (checkScope) before it calls the store.
//
// A request of the stateless revision (2026-07-28) passes the same checks up to
// the body, then the revision's own (checkModern: no session id, the version in
// header and _meta alike, Mcp-Method and Mcp-Name matching the body), and is
// served without a session: mcp-go answers it in a requestSession holding its
// endpoint's tools (stateless.go), and subscriptions/listen is served by the
// agent (listen.go), which rings the doorbell there.
//
// # Adding a verb
//
// A verb is one entry in the table built by (*Agent).table: a Tool with the tool's
// Name, the scope Verb that grants it, Define (the mcp.Tool definition, built per
// endpoint when a session starts, so descriptions can quote that endpoint's
// settings) and Handle (decode arguments with Call.Decode, check queues with
// checkScope or Agent.todoInScope, call the store, return a JSON object or an
// error). Rate limiting, the verb check, the structured result, the text copy of it
// and the mapping of errors to codes are done once, around every handler. Webhook
// verbs go in their own file (webhooks.go) as a method returning []Tool that table
// appends. Every annotation hint must be set explicitly (see annotate). The verbs
// are registered with mcp-go once, as placeholders; each session keeps its
// endpoint's definitions, and the tool filter (sessionView) shows it those.
//
// # Tools that are not verbs
//
// Module tools come from a ToolSource (Options.ToolSources). A source is asked for
// an endpoint's tools when each session starts and whenever that endpoint's
// sessions are refreshed; it decides which tools the endpoint may see. Its handlers
// run behind the same authentication and rate limit, and read the calling endpoint
// with EndpointFromContext. A source may also offer tools an endpoint may only be
// refused (Modules does, so a call to an ungranted or downed module tool answers
// forbidden or unavailable instead of "unknown tool"): its Hidden method names
// them, and the tool filter keeps them out of tools/list. Because mcp-go filters
// calls too, a before-call hook notes the called name in the request's context,
// and the filter lets exactly that tool through to its handler (modules.go).
//
// A module call runs apart from the request that started it, so that a module's
// elicitation can be answered across requests: under 2026-07-28 the call answers
// input_required and the client's retry carries the answer; under the session
// revisions mcp-go asks the session's client itself (elicit.go).
//
// # Keeping live sessions current
//
// A session's tool list is built when it starts. set_default_lease rebuilds it on
// every live session of the endpoint at once; Revalidate (run by Run every
// RevalidateEvery) rebuilds it when a human edited the endpoint, and ends the
// sessions of a revoked one (and those an OAuth grant opened, once the grant is
// revoked: see grants.go); RefreshSessions rebuilds on demand (say, when a
// module's tools changed). Each rebuild sends notifications/tools/list_changed. A
// verb withdrawn from an endpoint is hidden and refused from the next request on,
// without waiting for a rebuild.
//
// # Doorbell
//
// The store announces committed changes that make a todo claimable; the agent puts
// them on a bounded channel (a full channel drops the ring) and one goroutine (Run)
// sends notifications/claude/channel to every session with an open GET stream, and
// every subscriptions/listen stream that asked for it, whose endpoint's queue
// scope covers the todo's queue. Sending never blocks either: a
// session whose buffer is full misses that ring. The queue is the ledger; the ring is
// only a wake-up.
package agent
