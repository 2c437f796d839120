package modules

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// Elicitation: a stdio module may ask, in the middle of a tools/call, for
// information from the user (elicitation/create). Switchboard declares the
// capability to its modules and hands the request to whoever made the call: the
// Elicitor the caller put in the call's context (WithElicitor). Over stdio a
// request says nothing of the call it belongs to, so it is relayed only while
// exactly one call of the module is in flight; otherwise the module is told why
// not, in words its author can act on.

// Elicitor answers a module's elicitation request made during a call; ctx ends
// with the call.
type Elicitor func(ctx context.Context, params mcp.ElicitationParams) (*mcp.ElicitationResult, error)

type elicitorKey struct{}

// WithElicitor returns ctx carrying e, for Call: elicitation requests the module
// makes during that call go to e.
func WithElicitor(ctx context.Context, e Elicitor) context.Context {
	return context.WithValue(ctx, elicitorKey{}, e)
}

// errNoCaller is what a module that asks with no call in flight is told.
var errNoCaller = errors.New("Switchboard relays elicitation only during a tools/call, and no call of this module is in flight")

// callsInFlight tracks a session's tools/call requests in flight, each with the
// Elicitor of its caller (nil if it gave none) and its context.
type callsInFlight struct {
	mu    sync.Mutex
	next  uint64
	calls map[uint64]inFlight
}

type inFlight struct {
	ctx context.Context
	e   Elicitor
}

// add records a call in flight until the returned function is called.
func (c *callsInFlight) add(ctx context.Context) (done func()) {
	e, _ := ctx.Value(elicitorKey{}).(Elicitor)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.calls == nil {
		c.calls = map[uint64]inFlight{}
	}
	c.next++
	id := c.next
	c.calls[id] = inFlight{ctx: ctx, e: e}
	return func() {
		c.mu.Lock()
		delete(c.calls, id)
		c.mu.Unlock()
	}
}

// only returns the one call in flight, or why the request cannot be relayed.
func (c *callsInFlight) only() (inFlight, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch n := len(c.calls); {
	case n == 0:
		return inFlight{}, errNoCaller
	case n > 1:
		return inFlight{}, fmt.Errorf("Switchboard relays elicitation only while a single call of this module is in flight "+
			"(an elicitation request over stdio does not say which call asks), and %d are", n)
	}
	for _, f := range c.calls {
		return f, nil
	}
	panic("unreachable")
}

// elicitationRelay is the stdio session's elicitation handler (mcp-go's client
// declares the capability because it has one).
type elicitationRelay struct{ calls *callsInFlight }

func (r elicitationRelay) Elicit(_ context.Context, req mcp.ElicitationRequest) (*mcp.ElicitationResult, error) {
	f, err := r.calls.only()
	if err != nil {
		return nil, err
	}
	if f.e == nil {
		return nil, errors.New("the caller of this tool cannot answer elicitation requests: the tool must work without asking")
	}
	return f.e(f.ctx, req.Params)
}
