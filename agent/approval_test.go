package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/store"
)

// The human gate over real MCP: request_approval stops the lease, acks answer
// conflict saying it waits, list_todos shows it waiting, and after a human's
// decision claim_next gives the todo back to the worker that asked, with the
// answer. A stale lease_seq changes nothing.
func TestRequestApprovalRoundTrip(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("worker", []string{"deploys"}, nil)
	c := e.dial(cred, false)
	added := e.addTodo("deploys", `{"service": "api"}`)
	var claimed claimResult
	c.ok(t, VerbClaimNext, nil, &claimed)
	if !claimed.Claimed {
		t.Fatalf("claim_next = %+v", claimed)
	}
	if code := c.code(t, VerbRequestApproval, map[string]any{"todo_id": added.ID, "lease_seq": claimed.LeaseSeq + 1,
		"question": "deploy?"}); code != CodeConflict {
		t.Fatalf("request_approval under a lease not held: %s, want conflict", code)
	}
	if code := c.code(t, VerbRequestApproval, map[string]any{"todo_id": added.ID, "lease_seq": claimed.LeaseSeq,
		"question": ""}); code != CodeInvalidArgument {
		t.Fatalf("request_approval without a question: %s, want invalid_argument", code)
	}
	if got := e.todo(added.ID); got.Approval != nil || got.LeaseExpiry == nil {
		t.Fatalf("a refused request changed the todo: %+v", got)
	}
	var asked ackResult
	c.ok(t, VerbRequestApproval, map[string]any{"todo_id": added.ID, "lease_seq": claimed.LeaseSeq,
		"question": "Deploy api to production?"}, &asked)
	if asked.Todo.Waiting != store.WaitingApproval || asked.Todo.Approval.State != store.ApprovalAsked {
		t.Fatalf("request_approval answered %+v", asked.Todo)
	}
	msg := c.refusal(t, VerbComplete, map[string]any{"todo_id": added.ID, "lease_seq": claimed.LeaseSeq})
	if msg.Code != CodeConflict || !strings.Contains(msg.Message, "awaiting a human's approval") {
		t.Fatalf("complete while waiting: %+v", msg)
	}
	var list listResult
	c.ok(t, VerbListTodos, nil, &list)
	if len(list.Todos) != 1 || list.Todos[0].Waiting != store.WaitingApproval {
		t.Fatalf("list_todos = %+v", list.Todos)
	}
	if _, err := e.st.Decide(context.Background(), added.ID, true, "go ahead", "human:1"); err != nil {
		t.Fatal(err)
	}
	var again claimResult
	c.ok(t, VerbClaimNext, nil, &again)
	if !again.Claimed || again.Todo.ID != added.ID || again.Todo.Approval == nil ||
		again.Todo.Approval.State != store.ApprovalApproved || again.Todo.Approval.Comment != "go ahead" {
		t.Fatalf("claim_next after the decision = %+v", again.Todo)
	}
	var done ackResult
	c.ok(t, VerbComplete, map[string]any{"todo_id": added.ID, "lease_seq": again.LeaseSeq, "result": "deployed"}, &done)
}

// The session's instructions say when to ask, to an endpoint granted the verb only.
func TestApprovalRuleInInstructions(t *testing.T) {
	granted := sessionInstructions(store.Endpoint{Queues: []string{"q"}, Verbs: store.AllVerbs()})
	if !strings.Contains(granted, "call request_approval") {
		t.Errorf("instructions of an endpoint granted request_approval do not say when to use it")
	}
	without := sessionInstructions(store.Endpoint{Queues: []string{"q"}, Verbs: []string{VerbClaimNext}})
	if strings.Contains(without, "request_approval") {
		t.Errorf("instructions of an endpoint without request_approval mention it")
	}
}
