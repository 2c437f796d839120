package agent

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// todoTools is the table of todo and lease verbs.
func (a *Agent) todoTools() []Tool {
	return []Tool{
		{Name: VerbListTodos, Verb: VerbListTodos, Define: defineListTodos, Handle: a.listTodos},
		{Name: VerbClaim, Verb: VerbClaim, Define: defineClaim, Handle: a.claim},
		{Name: VerbClaimNext, Verb: VerbClaimNext, Define: defineClaimNext, Handle: a.claimNext},
		{Name: VerbHeartbeat, Verb: VerbHeartbeat, Define: defineHeartbeat, Handle: a.heartbeat},
		{Name: VerbComplete, Verb: VerbComplete, Define: defineComplete, Handle: a.complete},
		{Name: VerbFail, Verb: VerbFail, Define: defineFail, Handle: a.fail},
		{Name: VerbRelease, Verb: VerbRelease, Define: defineRelease, Handle: a.release},
		{Name: VerbGetDefaultLease, Verb: VerbGetDefaultLease, Define: defineGetDefaultLease, Handle: a.getDefaultLease},
		{Name: VerbSetDefaultLease, Verb: VerbSetDefaultLease, Define: defineSetDefaultLease, Handle: a.setDefaultLease},
		{Name: VerbRequestApproval, Verb: VerbRequestApproval, Define: defineRequestApproval, Handle: a.requestApproval},
	}
}

// Results. Compact rows are store.Todo with no payload (its JSON omits the field);
// only claimedTodo carries one.

// MaxResultBytes and MaxErrorBytes bound what complete and fail record: the
// outcome, not the work's output. They are kept with the todo, shown on the board
// and returned by list_todos's rows, so a megabyte there costs every reader.
const (
	MaxResultBytes = 64 << 10
	MaxErrorBytes  = 8 << 10
)

// claimedTodo is the full todo that claim and claim_next return. Its Payload
// shadows the embedded one so that an empty payload is still present.
type claimedTodo struct {
	store.Todo
	Payload string `json:"payload" jsonschema:"the todo's content: the text itself, or base64 when payload_encoding says so"`
	// PayloadEncoding is utf-8, or base64 for a payload that is not valid UTF-8
	// (a webhook's binary body), which JSON could not carry unchanged.
	PayloadEncoding string `json:"payload_encoding" jsonschema:"utf-8, or base64 for a payload that is not UTF-8 text"`
}

type claimResult struct {
	Claimed         bool         `json:"claimed" jsonschema:"true when a todo was claimed; false, with message, when none was"`
	Todo            *claimedTodo `json:"todo,omitempty" jsonschema:"the claimed todo, with its payload"`
	LeaseSeq        int64        `json:"lease_seq,omitempty" jsonschema:"the fencing token: pass it as lease_seq to heartbeat, complete, fail and release"`
	LeaseExpiresAt  *time.Time   `json:"lease_expires_at,omitempty" jsonschema:"when the lease lapses unless a heartbeat extends it"`
	LeaseTTLSeconds int          `json:"lease_ttl_seconds,omitempty" jsonschema:"the lease's length in seconds"`
	Message         string       `json:"message,omitempty" jsonschema:"why nothing was claimed"`
	// Claims is set by claim_next called with max (claimmany.go), in place of
	// the fields above but claimed and message.
	// A pointer, so that an empty list is still there (and absent without max).
	Claims *[]heldClaim `json:"claims,omitempty" jsonschema:"with max: every todo claimed, in the order claimed (highest priority, then oldest, first), each under its own lease"`
}

type listResult struct {
	Todos      []store.Todo `json:"todos" jsonschema:"compact rows, newest first: payload_size instead of the payload"`
	NextCursor string       `json:"next_cursor,omitempty" jsonschema:"pass it back as cursor for the next page; absent on the last page"`
}

type ackResult struct {
	Todo store.Todo `json:"todo" jsonschema:"the todo as it is now, without its payload"`
	// DeadLettered is set by fail: true when the todo went to the failed state.
	DeadLettered *bool `json:"dead_lettered,omitempty" jsonschema:"fail only: true when the todo went to the failed state and will not be retried"`
	// Next is set by complete and fail called with claim_next=true (claimafter.go).
	Next *claimResult `json:"next,omitempty" jsonschema:"with claim_next=true: the next todo claimed in the same call, as claim_next answers"`
}

type leaseInfo struct {
	DefaultLeaseTTLSeconds   *int `json:"default_lease_ttl_seconds" jsonschema:"this endpoint's default lease in seconds; null when it has none of its own"`
	EffectiveLeaseTTLSeconds int  `json:"effective_lease_ttl_seconds" jsonschema:"what a claim or heartbeat without lease_ttl_seconds gets"`
	BuiltinLeaseTTLSeconds   int  `json:"builtin_lease_ttl_seconds" jsonschema:"the server's default, used when the endpoint has none"`
	MaxLeaseTTLSeconds       int  `json:"max_lease_ttl_seconds" jsonschema:"the longest lease anyone may ask for"`
}

func compact(t store.Todo) store.Todo {
	t.Payload = ""
	return t
}

func newLeaseInfo(def int) leaseInfo {
	info := leaseInfo{EffectiveLeaseTTLSeconds: effectiveDefault(def), BuiltinLeaseTTLSeconds: DefaultLeaseSeconds,
		MaxLeaseTTLSeconds: MaxLeaseSeconds}
	if def > 0 {
		info.DefaultLeaseTTLSeconds = &def
	}
	return info
}

// held checks the todo_id and lease_seq arguments of a verb on a todo the caller
// holds, then the verb's scope, and returns the acknowledgement for the store.
func held(c *Call, verb string, todoID, leaseSeq *int64) (store.Ack, error) {
	id, err := positiveID("todo_id", todoID)
	if err != nil {
		return store.Ack{}, err
	}
	ack, err := c.ack(id, leaseSeq)
	if err != nil {
		return store.Ack{}, err
	}
	// The queue is checked in the store's transaction, against ack.Queues, with
	// the same not_found answer todoInScope gives; reading it here first as well
	// would cost every complete a query.
	if err := checkScope(c.Endpoint, verb); err != nil {
		return store.Ack{}, err
	}
	return ack, nil
}

// ack builds the store acknowledgement for a call on todo id. Without lease_seq it
// carries the lease this session claimed, when it claimed one; else none, and the
// store refuses it (see unfenced): only the holder that made a claim may act on
// it without naming its lease. A session's memory lives as long as the session,
// and it is the same on the fast path and on mcp-go's, which share the session.
func (c *Call) ack(id int64, seq *int64) (store.Ack, error) {
	// Never nil: the store checks a nil Queues against nothing.
	a := store.Ack{ID: id, Owner: c.Actor, Queues: c.Endpoint.Queues}
	if a.Queues == nil {
		a.Queues = []string{}
	}
	switch {
	case seq != nil && *seq < 1:
		return a, errorf(CodeInvalidArgument, "lease_seq must be a positive whole number")
	case seq != nil:
		a.LeaseSeq = *seq
	case c.session != nil:
		a.LeaseSeq = max(c.session.leaseOf(id), 0)
	}
	return a, nil
}

// unfenced says, in the caller's terms, why an acknowledgement without lease_seq
// was refused (store.ErrNoLeaseSeq); other errors pass unchanged.
func (c *Call) unfenced(verb string, id int64, err error) error {
	if !errors.Is(err, store.ErrNoLeaseSeq) {
		return err
	}
	if c.session == nil {
		return errorf(CodeConflict, "%s todo %d: pass lease_seq from your claim: a call outside an MCP session cannot act without it", verb, id)
	}
	if c.session.leaseOf(id) == twiceClaimed {
		return errorf(CodeConflict, "%s todo %d: pass lease_seq from your claim: this session claimed the todo more than once "+
			"(a lease lapsed and it was claimed again), so without it the newest claim cannot be told from a lost one", verb, id)
	}
	return errorf(CodeConflict, "%s todo %d: pass lease_seq from your claim: without it, only the session that made the claim "+
		"may act, and this session has none on record (a claim made in another session, or before Switchboard restarted, needs its lease_seq)",
		verb, id)
}

func (c *Call) claimed(t store.Todo) {
	if c.session != nil {
		c.session.rememberLease(t.ID, t.LeaseSeq)
	}
}

func (c *Call) finished(id int64) {
	if c.session != nil {
		c.session.forgetLease(id)
	}
}

func (a *Agent) listTodos(ctx context.Context, c *Call) (any, error) {
	var in struct {
		Queue  string `json:"queue"`
		State  string `json:"state"`
		Limit  *int64 `json:"limit"`
		Cursor string `json:"cursor"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	queues := c.Endpoint.Queues
	if in.Queue != "" {
		if err := checkScope(c.Endpoint, VerbListTodos, in.Queue); err != nil {
			return nil, err
		}
		queues = []string{in.Queue}
	}
	switch in.State {
	case "", store.StatePending, store.StateClaimed, store.StateDone, store.StateFailed:
	default:
		return nil, errorf(CodeInvalidArgument, "state must be pending, claimed, done or failed, not %q", in.State)
	}
	limit, before, err := pageArgs(in.Limit, in.Cursor)
	if err != nil {
		return nil, err
	}
	out := listResult{Todos: []store.Todo{}}
	// An empty queue list means "every queue" to the store: never pass one.
	if len(queues) == 0 {
		return out, nil
	}
	// One more than a page says whether there is a next one.
	rows, err := a.st.ListTodos(ctx, store.TodoFilter{Queues: queues, State: in.State, Before: before, Limit: limit + 1})
	if err != nil {
		return nil, err
	}
	rows, older := store.PageOf(rows, limit)
	out.NextCursor = nextCursor(older)
	for _, t := range rows {
		out.Todos = append(out.Todos, compact(t))
	}
	return out, nil
}

func (a *Agent) claim(ctx context.Context, c *Call) (any, error) {
	var in struct {
		TodoID   *int64   `json:"todo_id"`
		LeaseTTL *float64 `json:"lease_ttl_seconds"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	id, err := positiveID("todo_id", in.TodoID)
	if err != nil {
		return nil, err
	}
	if err := a.todoInScope(ctx, c.Endpoint, VerbClaim, id); err != nil {
		return nil, err
	}
	ttl, err := lease(c.Endpoint, in.LeaseTTL)
	if err != nil {
		return nil, err
	}
	t, err := a.st.Claim(ctx, store.Ack{ID: id, Owner: c.Actor, Queues: c.Endpoint.Queues}, ttl)
	if err != nil {
		return nil, err
	}
	c.claimed(t)
	return claimedResult(t, ttl), nil
}

func claimedResult(t store.Todo, ttl time.Duration) claimResult {
	todo := &claimedTodo{Todo: t}
	todo.Payload, todo.PayloadEncoding = JSONText(t.Payload)
	return claimResult{Claimed: true, Todo: todo, LeaseSeq: t.LeaseSeq,
		LeaseExpiresAt: t.LeaseExpiry, LeaseTTLSeconds: int(ttl / time.Second)}
}

func (a *Agent) claimNext(ctx context.Context, c *Call) (any, error) {
	var in struct {
		Queue    string   `json:"queue"`
		Queues   []string `json:"queues"`
		LeaseTTL *float64 `json:"lease_ttl_seconds"`
		Max      *int     `json:"max"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	if in.Max != nil && (*in.Max < 1 || *in.Max > MaxClaimsPerCall) {
		return nil, errorf(CodeInvalidArgument, "max must be 1 to %d, not %d", MaxClaimsPerCall, *in.Max)
	}
	queues := c.Endpoint.Queues
	if in.Queue != "" {
		in.Queues = append(in.Queues, in.Queue)
	}
	if len(in.Queues) > 0 {
		if err := checkScope(c.Endpoint, VerbClaimNext, in.Queues...); err != nil {
			return nil, err
		}
		slices.Sort(in.Queues)
		queues = slices.Compact(in.Queues)
	}
	ttl, err := lease(c.Endpoint, in.LeaseTTL)
	if err != nil {
		return nil, err
	}
	if in.Max != nil {
		return a.claimSeveral(ctx, c, queues, ttl, *in.Max)
	}
	return a.claimFrom(ctx, c, queues, ttl)
}

// claimFrom claims the oldest claimable todo in queues for the caller: claim_next's
// claim, which complete and fail with claim_next=true make too (claimafter.go).
func (a *Agent) claimFrom(ctx context.Context, c *Call, queues []string, ttl time.Duration) (claimResult, error) {
	if len(queues) == 0 {
		return claimResult{Message: noQueues}, nil
	}
	t, ok, err := a.st.ClaimNext(ctx, c.Actor, queues, ttl)
	if err != nil {
		return claimResult{}, err
	}
	return claimResultOf(c, t, ok, ttl), nil
}

// noQueues is a claim's answer on an endpoint that works no queue.
const noQueues = "this endpoint has no queues to claim from"

// claimResultOf answers a claim that claimed t (ok), or found nothing (!ok).
func claimResultOf(c *Call, t store.Todo, ok bool, ttl time.Duration) claimResult {
	if !ok {
		return claimResult{Message: "nothing is claimable right now; wait for a notification or call again later"}
	}
	c.claimed(t)
	return claimedResult(t, ttl)
}

func (a *Agent) heartbeat(ctx context.Context, c *Call) (any, error) {
	var in struct {
		TodoID   *int64   `json:"todo_id"`
		LeaseSeq *int64   `json:"lease_seq"`
		LeaseTTL *float64 `json:"lease_ttl_seconds"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	ack, err := held(c, VerbHeartbeat, in.TodoID, in.LeaseSeq)
	if err != nil {
		return nil, err
	}
	ttl, err := lease(c.Endpoint, in.LeaseTTL)
	if err != nil {
		return nil, err
	}
	t, err := a.st.Heartbeat(ctx, ack, ttl)
	if err != nil {
		return nil, c.unfenced(VerbHeartbeat, ack.ID, err)
	}
	return ackResult{Todo: compact(t)}, nil
}

func (a *Agent) complete(ctx context.Context, c *Call) (any, error) {
	var in struct {
		TodoID   *int64 `json:"todo_id"`
		LeaseSeq *int64 `json:"lease_seq"`
		Result   string `json:"result"`
		Next     bool   `json:"claim_next"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	if len(in.Result) > MaxResultBytes {
		return nil, errorf(CodeInvalidArgument, "result is %d bytes; at most %d are kept (put a large output somewhere and record where)",
			len(in.Result), MaxResultBytes)
	}
	ack, err := held(c, VerbComplete, in.TodoID, in.LeaseSeq)
	if err != nil {
		return nil, err
	}
	next, err := nextLease(c, in.Next)
	if err != nil {
		return nil, err
	}
	t, claimed, err := a.ackThen(c, VerbComplete, ack, next,
		func() (store.Todo, error) { return a.st.Complete(ctx, ack, in.Result) },
		func(queues []string, ttl time.Duration) (store.Todo, store.Next, error) {
			return a.st.CompleteThenClaim(ctx, ack, in.Result, queues, ttl)
		})
	if err != nil {
		return nil, err
	}
	return ackResult{Todo: compact(t), Next: claimed}, nil
}

func (a *Agent) fail(ctx context.Context, c *Call) (any, error) {
	var in struct {
		TodoID   *int64 `json:"todo_id"`
		LeaseSeq *int64 `json:"lease_seq"`
		Error    string `json:"error"`
		Retry    *bool  `json:"retry"`
		Next     bool   `json:"claim_next"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	if in.Error == "" {
		return nil, errorf(CodeInvalidArgument, "error is required: say what went wrong")
	}
	if len(in.Error) > MaxErrorBytes {
		return nil, errorf(CodeInvalidArgument, "error is %d bytes; at most %d are kept", len(in.Error), MaxErrorBytes)
	}
	ack, err := held(c, VerbFail, in.TodoID, in.LeaseSeq)
	if err != nil {
		return nil, err
	}
	next, err := nextLease(c, in.Next)
	if err != nil {
		return nil, err
	}
	retry := in.Retry == nil || *in.Retry
	t, claimed, err := a.ackThen(c, VerbFail, ack, next,
		func() (store.Todo, error) { return a.st.Fail(ctx, ack, in.Error, retry) },
		func(queues []string, ttl time.Duration) (store.Todo, store.Next, error) {
			return a.st.FailThenClaim(ctx, ack, in.Error, retry, queues, ttl)
		})
	if err != nil {
		return nil, err
	}
	dead := t.State == store.StateFailed
	return ackResult{Todo: compact(t), DeadLettered: &dead, Next: claimed}, nil
}

func (a *Agent) release(ctx context.Context, c *Call) (any, error) {
	var in struct {
		TodoID   *int64 `json:"todo_id"`
		LeaseSeq *int64 `json:"lease_seq"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	ack, err := held(c, VerbRelease, in.TodoID, in.LeaseSeq)
	if err != nil {
		return nil, err
	}
	t, err := a.st.Release(ctx, ack)
	if err != nil {
		return nil, c.unfenced(VerbRelease, ack.ID, err)
	}
	c.finished(ack.ID)
	return ackResult{Todo: compact(t)}, nil
}

func (a *Agent) getDefaultLease(ctx context.Context, c *Call) (any, error) {
	if err := c.Decode(&struct{}{}); err != nil {
		return nil, err
	}
	def, err := a.st.DefaultLease(ctx, c.Endpoint.ID)
	if err != nil {
		return nil, err
	}
	return newLeaseInfo(def), nil
}

func (a *Agent) setDefaultLease(ctx context.Context, c *Call) (any, error) {
	var in struct {
		Seconds *int64 `json:"default_lease_ttl_seconds"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	if in.Seconds == nil {
		return nil, errorf(CodeInvalidArgument, "default_lease_ttl_seconds is required")
	}
	if *in.Seconds < 0 || *in.Seconds > MaxLeaseSeconds {
		return nil, errorf(CodeInvalidArgument, "default_lease_ttl_seconds must be from 0 to %d", MaxLeaseSeconds)
	}
	v := int(*in.Seconds)
	ep, err := a.st.UpdateEndpoint(ctx, c.Endpoint.ID, store.EndpointSpec{DefaultLeaseTTL: &v}, c.Actor)
	if err != nil {
		return nil, err
	}
	a.refresh(ctx, ep)
	return newLeaseInfo(ep.DefaultLeaseTTL), nil
}
