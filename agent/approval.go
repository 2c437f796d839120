package agent

import (
	"context"
	"fmt"
	"slices"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/store"
)

// The human gate, as agents see it: request_approval stops the caller's lease
// and asks a human; the answer comes back with the next claim of the todo.

// approvalRule is the lease contract's sentence on when to ask, in the session's
// instructions of an endpoint granted request_approval.
const approvalRule = "Before an irreversible step a human should decide on (deploying, deleting data, paying, " +
	"anything you were told needs sign-off), call request_approval with the todo_id, lease_seq and a short question " +
	"instead of taking it. Your lease stops while it waits (no heartbeat needed); heartbeat, complete and fail answer " +
	"conflict until a human decides. Then your doorbell rings and claim_next gives the todo back to you first, with " +
	"approval {state: approved or denied, comment}: take the step only if approved; if denied, complete or fail " +
	"the todo without it."

func defineRequestApproval(store.Endpoint) mcp.Tool {
	return mcp.NewTool(VerbRequestApproval,
		mcp.WithDescription("Ask a human before an irreversible step on a todo you hold. The todo waits under your "+
			"claim with its lease stopped; no one else can claim it. When a human approves or denies, the todo is "+
			"yours to claim again first (for a minute, then anyone's), and the claim result carries approval "+
			"{state, comment, by}. Answers conflict if your lease lapsed or was lost. Returns the compact row."),
		todoIDArg(), leaseSeqArg(),
		mcp.WithString("question", mcp.Required(), mcp.MinLength(1), mcp.MaxLength(store.MaxApprovalText),
			mcp.Description(fmt.Sprintf("What the human decides, in a sentence or two (what you will do, and why it "+
				"cannot be undone); at most %d bytes.", store.MaxApprovalText))),
		closed,
		returns[ackResult](),
		annotate("Ask a human for approval", false, false, false, false),
	)
}

func (a *Agent) requestApproval(ctx context.Context, c *Call) (any, error) {
	var in struct {
		TodoID   *int64 `json:"todo_id"`
		LeaseSeq *int64 `json:"lease_seq"`
		Question string `json:"question"`
	}
	if err := c.Decode(&in); err != nil {
		return nil, err
	}
	if in.Question == "" || len(in.Question) > store.MaxApprovalText {
		return nil, errorf(CodeInvalidArgument, "question is required, at most %d bytes", store.MaxApprovalText)
	}
	ack, err := held(c, VerbRequestApproval, in.TodoID, in.LeaseSeq)
	if err != nil {
		return nil, err
	}
	t, err := a.st.RequestApproval(ctx, ack, in.Question)
	if err != nil {
		return nil, c.unfenced(VerbRequestApproval, ack.ID, err)
	}
	// The next claim starts a new lease; this one is over.
	c.finished(ack.ID)
	return ackResult{Todo: compact(t)}, nil
}

// approvalInstructions is approvalRule for an endpoint granted request_approval.
func approvalInstructions(ep store.Endpoint) string {
	if !slices.Contains(ep.Verbs, VerbRequestApproval) {
		return ""
	}
	return "\n\n" + approvalRule
}
