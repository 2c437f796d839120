package agent

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/store"
)

// Elicitation relay. A module tool may ask its caller for information mid-call
// (elicitation/create). The module call runs apart from the agent's request (a
// moduleRun); when the module asks, the tool call is answered with the 2026-07-28
// revision's input_required result, carrying the module's request and an opaque
// requestState. The agent's client asks its user and calls the tool again with
// the answer and the state; the answer goes to the module, still waiting, and the
// call goes on to its result (or to another question). Under 2025-06-18 and
// 2025-11-25 mcp-go plays the client's part itself: it sends the session's client
// elicitation/create and calls the handler again with the answer, so one path
// serves both. A pending run is bound to the credential that started it, ends
// with the module call (--module-call-timeout bounds the whole call, questions
// included), and a credential has at most MaxPendingInput of them.

// elicitKey is the key of the module's question in inputRequests.
const elicitKey = "elicitation"

// moduleRun is one module call in flight, apart from the request that started it.
type moduleRun struct {
	endpointID int64
	tool       string
	args       json.RawMessage            // as the call gave them; a retry must carry the same
	caps       *mcp.ElicitationCapability // the caller's; nil when noElicit says why
	noElicit   string
	asks       chan elicitAsk
	done       chan runEnd // buffered: the run never waits for a reader
	cancel     context.CancelFunc
}

// elicitAsk is one question of the module, and where its answer goes.
type elicitAsk struct {
	params mcp.ElicitationParams
	answer chan elicitReply // buffered 1; closed unanswered when the run is dropped
}

type elicitReply struct {
	res *mcp.ElicitationResult
	err error
}

// runEnd is what a run ends with: the tool's answer to the agent.
type runEnd struct{ res *mcp.CallToolResult }

// elicit is the run's modules.Elicitor: it hands the question to the request
// waiting on the run (now or, after an input_required answer, on the retry).
func (r *moduleRun) elicit(ctx context.Context, p mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
	switch {
	case r.noElicit != "":
		return nil, fmt.Errorf("%s", r.noElicit)
	case p.Mode == mcp.ElicitationModeURL && r.caps.URL == nil:
		return nil, fmt.Errorf("the agent's MCP client declared no URL-mode elicitation")
	}
	ask := elicitAsk{params: p, answer: make(chan elicitReply, 1)}
	select {
	case r.asks <- ask:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case reply, ok := <-ask.answer:
		if !ok {
			return nil, fmt.Errorf("the question was dropped unanswered")
		}
		return reply.res, reply.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// elicitationOf returns the elicitation capability of the client of the request
// in ctx, or why it has none: its revision or its declared capabilities.
func elicitationOf(ctx context.Context) (*mcp.ElicitationCapability, string) {
	var caps mcp.ClientCapabilities
	if info := server.RequestProtocolInfoFromContext(ctx); info != nil && info.Modern {
		if info.ClientCapabilities != nil {
			caps = *info.ClientCapabilities
		}
	} else {
		v := server.RequestProtocolVersion(ctx)
		if v < mcp.ProtocolVersion20250618 {
			return nil, "the agent's MCP client speaks revision " + v + ", which has no elicitation; the tool must work without asking"
		}
		if cs, ok := server.ClientSessionFromContext(ctx).(server.SessionWithClientInfo); ok {
			caps = cs.GetClientCapabilities()
		}
	}
	if caps.Elicitation == nil {
		return nil, "the agent's MCP client declared no elicitation capability; the tool must work without asking"
	}
	return caps.Elicitation, ""
}

// pendingRuns are the runs waiting for their agent's answer, by requestState.
type pendingRuns struct {
	mu   sync.Mutex
	byID map[string]pendingRun
	per  map[int64]int // endpoint → its pending runs
}

type pendingRun struct {
	run *moduleRun
	ask elicitAsk
}

// add keeps run waiting on ask and returns its requestState; false when the
// run's endpoint already has max pending.
func (p *pendingRuns) add(run *moduleRun, ask elicitAsk, max int) (string, bool) {
	b := make([]byte, 18)
	rand.Read(b)
	state := base64.RawURLEncoding.EncodeToString(b)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.per[run.endpointID] >= max {
		return "", false
	}
	if p.byID == nil {
		p.byID, p.per = map[string]pendingRun{}, map[int64]int{}
	}
	p.byID[state] = pendingRun{run: run, ask: ask}
	p.per[run.endpointID]++
	return state, true
}

// Why take found no run to answer.
var (
	errNoRun          = errors.New("no such run")
	errOtherArguments = errors.New("other arguments")
)

// take removes and returns the run waiting under state, if it belongs to the
// endpoint and the tool (a run of another endpoint is not told apart from none,
// errNoRun) and was called with args (errOtherArguments: it keeps waiting).
func (p *pendingRuns) take(state string, endpointID int64, tool string, args json.RawMessage) (pendingRun, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pr, ok := p.byID[state]
	switch {
	case !ok || pr.run.endpointID != endpointID || pr.run.tool != tool:
		return pendingRun{}, errNoRun
	case !sameArguments(pr.run.args, args):
		return pendingRun{}, errOtherArguments
	}
	p.removeLocked(state, pr)
	return pr, nil
}

// sameArguments says whether a and b are the same arguments, however written
// (key order, spacing, number form; none and {} alike).
func sameArguments(a, b json.RawMessage) bool {
	return canonicalArguments(a) == canonicalArguments(b)
}

func canonicalArguments(raw json.RawMessage) string {
	var v any
	if len(raw) > 0 && json.Unmarshal(raw, &v) != nil {
		return "invalid:" + string(raw)
	}
	if v == nil {
		v = map[string]any{}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// cancel ends the run still waiting under state, if any.
func (p *pendingRuns) cancel(state string) {
	p.mu.Lock()
	pr, ok := p.byID[state]
	if ok {
		p.removeLocked(state, pr)
	}
	p.mu.Unlock()
	if ok {
		pr.run.cancel()
	}
}

// drop forgets run (it ended), closing the question it waited on.
func (p *pendingRuns) drop(run *moduleRun) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for state, pr := range p.byID {
		if pr.run == run {
			p.removeLocked(state, pr)
			close(pr.ask.answer)
		}
	}
}

func (p *pendingRuns) removeLocked(state string, pr pendingRun) {
	delete(p.byID, state)
	if p.per[pr.run.endpointID]--; p.per[pr.run.endpointID] <= 0 {
		delete(p.per, pr.run.endpointID)
	}
}

// inputRequired is the tool's answer carrying the module's question.
func inputRequired(p mcp.ElicitationParams, state string) *mcp.CallToolResult {
	return server.NewInputRequestBuilder(state).Elicit(elicitKey, p).ToolResult()
}

// withElicitor gives the module call of run its Elicitor.
func withElicitor(ctx context.Context, run *moduleRun) context.Context {
	return modules.WithElicitor(ctx, run.elicit)
}

// await waits on run for this request: its end, or the module's next question,
// answered as input_required. The agent giving up (ctx) cancels the run.
func (m *Modules) await(ctx context.Context, run *moduleRun) *mcp.CallToolResult {
	for {
		select {
		case end := <-run.done:
			return end.res
		case ask := <-run.asks:
			state, ok := m.waiting.add(run, ask, m.opts.MaxPendingInput)
			if !ok {
				ask.answer <- elicitReply{err: fmt.Errorf("the agent already has %d tool calls waiting for its answers; "+
					"answer those first", m.opts.MaxPendingInput)}
				continue
			}
			if !server.IsModernRequest(ctx) {
				// mcp-go asks the session's client and calls again within this
				// request; if it cannot, the run must not wait out its timeout.
				context.AfterFunc(ctx, func() { m.waiting.cancel(state) })
			}
			return inputRequired(ask.params, state)
		case <-ctx.Done():
			run.cancel()
			return (<-run.done).res
		}
	}
}

// resume answers a pending run's question with what the retried call carries,
// and waits on the run again. A refused retry is audited like a refused call.
func (m *Modules) resume(ctx context.Context, ep store.Endpoint, name string, req mcp.CallToolRequest) *mcp.CallToolResult {
	start := time.Now()
	refuse := func(outcome string, e *Error) *mcp.CallToolResult {
		t, _ := m.lookup(name)
		m.record(ctx, ep, name, t.Module, outcome, time.Since(start))
		return e.result()
	}
	// The answer is checked before the run is taken, so that a malformed retry
	// leaves the question waiting for a good one.
	answer := server.ElicitationResponse(req.Params.InputResponses, elicitKey)
	if answer == nil || !slices.Contains([]mcp.ElicitationResponseAction{mcp.ElicitationResponseActionAccept,
		mcp.ElicitationResponseActionDecline, mcp.ElicitationResponseActionCancel}, answer.Action) {
		return refuse(OutcomeError, errorf(CodeInvalidArgument, "inputResponses must answer %q with an elicitation result "+
			"(action accept, decline or cancel) and requestState must be the one given with it", elicitKey))
	}
	args, err := callArguments(req)
	if err != nil {
		return refuse(OutcomeError, errorf(CodeInvalidArgument, "arguments: %v", err))
	}
	pr, err := m.waiting.take(req.Params.RequestState, ep.ID, name, args)
	switch {
	case errors.Is(err, errOtherArguments):
		return refuse(OutcomeError, errorf(CodeInvalidArgument, "arguments differ from those of the call that requestState answers: "+
			"retry %s with the same arguments", name))
	case err != nil:
		return refuse(OutcomeNotFound, errorf(CodeNotFound, "requestState is unknown, expired, or not this credential's: "+
			"call %s again without it", name))
	}
	if t, known := m.lookup(name); !known || !mayUse(ep, t.Module, t.Name) {
		pr.run.cancel()
		<-pr.run.done
		if !known {
			return refuse(OutcomeNotFound, errorf(CodeNotFound, "no module offers the tool %s any more", name))
		}
		return refuse(OutcomeForbidden, errorf(CodeForbidden, "the tool %s is not granted to this endpoint", name))
	}
	pr.ask.answer <- elicitReply{res: answer}
	return m.await(ctx, pr.run)
}
