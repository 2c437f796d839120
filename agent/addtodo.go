package agent

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/store"
)

// Agents hand work on: add_todo, never granted by default, puts a todo on one of
// the queues the endpoint may add to (--add-queues). The todo says the agent made
// it: source agent, trust mode agent, added_by agent:<id>.

// VerbAddTodo is the opt-in verb (store.OptInVerbs).
const VerbAddTodo = "add_todo"

// MaxAddPayloadBytes bounds an added todo's payload, as the CLI and the board do.
const MaxAddPayloadBytes = 1 << 20

// handOnTools is the table of the opt-in verbs.
func (a *Agent) handOnTools() []Tool {
	define := func(ep store.Endpoint) mcp.Tool { return defineAddTodo(ep, a.st.AddTodoCap()) }
	return []Tool{{Name: VerbAddTodo, Verb: VerbAddTodo, Define: define, Handle: a.addTodo}}
}

type addedResult struct {
	Todo store.Todo `json:"todo" jsonschema:"the new todo, without its payload"`
}

func defineAddTodo(ep store.Endpoint, addCap int) mcp.Tool {
	queue := []mcp.PropertyOption{mcp.Required(), mcp.Description("The queue to add to: one of this endpoint's add queues.")}
	if len(ep.AddQueues) > 0 {
		queue = append(queue, mcp.Enum(ep.AddQueues...))
	}
	return mcp.NewTool(VerbAddTodo,
		mcp.WithDescription(fmt.Sprintf("Hand work on: add a todo to a queue this endpoint may add to, for whichever "+
			"agent works that queue. The todo records that you made it (trust mode agent: authenticated, not signed). "+
			"You may have at most %d pending todos you added; past that it answers ceiling_exceeded until some are "+
			"claimed. Returns the new todo's compact row.", addCap)),
		mcp.WithString("queue", queue...),
		mcp.WithString("payload", mcp.Required(), mcp.MaxLength(MaxAddPayloadBytes),
			mcp.Description("The todo's content, JSON recommended; at most 1 MiB.")),
		mcp.WithString("key", mcp.MaxLength(store.MaxKeyBytes),
			mcp.Description("Optional subject of the todo (e.g. octo/repo#42): todos of one key on a queue are worked one at a time, oldest first.")),
		mcp.WithNumber("priority", mcp.Description("Optional priority: claim_next takes the highest first (default 0).")),
		mcp.WithNumber("delay_seconds", mcp.Min(0), mcp.Description("Optional: the todo is not claimable for this many seconds.")),
		closed,
		returns[addedResult](),
		annotate("Add a todo", false, false, false, false),
	)
}

func (a *Agent) addTodo(ctx context.Context, c *Call) (any, error) {
	var in struct {
		Queue    string  `json:"queue"`
		Payload  *string `json:"payload"`
		Key      string  `json:"key"`
		Priority int     `json:"priority"`
		Delay    float64 `json:"delay_seconds"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	switch {
	case in.Payload == nil:
		return nil, errorf(CodeInvalidArgument, "payload is required ('' adds an empty one)")
	case len(*in.Payload) > MaxAddPayloadBytes:
		return nil, errorf(CodeInvalidArgument, "payload is %d bytes; at most %d", len(*in.Payload), MaxAddPayloadBytes)
	case !slices.Contains(c.Endpoint.AddQueues, in.Queue):
		if len(c.Endpoint.AddQueues) == 0 {
			return nil, errorf(CodeForbidden, "this endpoint may add to no queue: an operator sets them (endpoint update ID --add-queues q1,…)")
		}
		return nil, errorf(CodeForbidden, "this endpoint may add to %v only, not %q", c.Endpoint.AddQueues, in.Queue)
	}
	if in.Delay < 0 || in.Delay > store.MaxDelay.Seconds() {
		// Checked in seconds: a duration made of 1e300 of them would overflow.
		return nil, errorf(CodeInvalidArgument, "delay_seconds %s: must be from 0 to %.0f", seconds(in.Delay), store.MaxDelay.Seconds())
	}
	opts := store.TodoOptions{Key: in.Key, Priority: in.Priority, Delay: time.Duration(in.Delay * float64(time.Second))}
	if err := opts.ValidateNew(); err != nil {
		return nil, errorf(CodeInvalidArgument, "%v", err)
	}
	t, err := a.st.AddAgentTodo(ctx, c.Actor, in.Queue, *in.Payload, c.Endpoint.AddQueues, opts)
	if err != nil {
		return nil, err
	}
	return addedResult{Todo: compact(t)}, nil
}

// seconds writes a number of seconds as given: 2592000.5, not 2.5920005e+06;
// with an exponent only past what anyone would type out.
func seconds(v float64) string {
	if math.Abs(v) < 1e15 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
