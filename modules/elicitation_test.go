package modules

import (
	"context"
	"strings"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
)

// A module's question goes to the caller of the one call in flight, with that
// call's context; with none, or several (stdio does not say which asks), or a
// caller that cannot answer, the module is told why.
func TestElicitationRelayPicksTheOnlyCall(t *testing.T) {
	var calls callsInFlight
	relay := elicitationRelay{&calls}
	ask := func() (*mcp.ElicitationResult, error) {
		return relay.Elicit(context.Background(), mcp.ElicitationRequest{Params: mcp.ElicitationParams{Message: "Which one?"}})
	}
	if _, err := ask(); err != errNoCaller {
		t.Fatalf("no call in flight: %v; want errNoCaller", err)
	}

	type key struct{}
	var gotCtx context.Context
	var gotMsg string
	asker := WithElicitor(context.WithValue(context.Background(), key{}, "the call"), func(ctx context.Context, p mcp.ElicitationParams) (*mcp.ElicitationResult, error) {
		gotCtx, gotMsg = ctx, p.Message
		return &mcp.ElicitationResult{ElicitationResponse: mcp.ElicitationResponse{Action: mcp.ElicitationResponseActionDecline}}, nil
	})
	done := calls.add(asker)
	res, err := ask()
	if err != nil || res.Action != mcp.ElicitationResponseActionDecline || gotMsg != "Which one?" || gotCtx.Value(key{}) != "the call" {
		t.Fatalf("one call: %+v, %v (asked %q); want its caller's answer, asked with its context", res, err, gotMsg)
	}

	other := calls.add(context.Background())
	if _, err := ask(); err == nil || !strings.Contains(err.Error(), "and 2 are") {
		t.Errorf("two calls in flight: %v; want a refusal naming two", err)
	}
	done()
	if _, err := ask(); err == nil || !strings.Contains(err.Error(), "cannot answer") {
		t.Errorf("one call whose caller gave no Elicitor: %v; want a refusal", err)
	}
	other()
	if _, err := ask(); err != errNoCaller {
		t.Errorf("after both ended: %v; want errNoCaller", err)
	}
}
