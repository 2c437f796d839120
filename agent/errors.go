package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/store"
)

// Error codes agents can act on. They are a contract: never rename one.
const (
	CodeForbidden       = "forbidden"
	CodeNotFound        = "not_found"
	CodeConflict        = "conflict"
	CodeInvalidArgument = "invalid_argument"
	CodeRateLimited     = "rate_limited"
	CodeUnavailable     = "unavailable"
	CodeCeilingExceeded = "ceiling_exceeded"
)

// Codes is every error code, as outputSchemas list them.
var Codes = []string{CodeForbidden, CodeNotFound, CodeConflict, CodeInvalidArgument, CodeRateLimited,
	CodeUnavailable, CodeCeilingExceeded}

// Error is a refusal with a stable code. Handlers return it for outcomes the store
// does not decide (scope, arguments, rate); store sentinels are mapped in toolError.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func errorf(code, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...)}
}

// errorPayload is the structuredContent of a failed call.
type errorPayload struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// toolError turns any handler error into the tool result the agent sees. It is the
// one place where store sentinel errors become codes. Errors with no code are
// logged and reported as unavailable without their detail, which may name files
// or SQL.
func (a *Agent) toolError(tool string, err error) *mcp.CallToolResult {
	var e *Error
	var word *store.UnknownWordError
	switch {
	case errors.As(err, &e):
	case errors.As(err, &word) && word.What == store.WordSourceType:
		e = &Error{CodeInvalidArgument, "source_type must be one of " + strings.Join(word.Known, ", ")}
	case errors.Is(err, store.ErrNotFound):
		e = &Error{CodeNotFound, store.Reason(err, store.ErrNotFound)}
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrAlreadyExists):
		e = &Error{CodeConflict, store.Reason(err, store.ErrConflict, store.ErrAlreadyExists)}
	case errors.Is(err, store.ErrInvalid):
		e = &Error{CodeInvalidArgument, store.Reason(err, store.ErrInvalid)}
	case errors.Is(err, store.ErrAddCap):
		e = &Error{CodeCeilingExceeded, store.Reason(err, store.ErrAddCap)}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, store.ErrClosed):
		e = &Error{CodeUnavailable, "the server is busy or shutting down; retry shortly"}
	default:
		if n := a.failures.Note(tool, a.st.Now()); n > 0 {
			a.log.Error("tool call failed", "tool", tool, "err", err, "failed", n)
		}
		e = &Error{CodeUnavailable, "the server could not complete the call; retry shortly"}
	}
	return e.result()
}

// result is the tool result that carries the refusal.
func (e *Error) result() *mcp.CallToolResult {
	return &mcp.CallToolResult{
		Content:           []mcp.Content{mcp.NewTextContent(e.Error())},
		StructuredContent: errorPayload{Code: e.Code, Message: e.Message},
		IsError:           true,
	}
}
