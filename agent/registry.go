package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/store"
)

// Tool is one entry of the verb table (see the package comment).
type Tool struct {
	// Name is what agents call. For verbs it is the verb.
	Name string
	// Verb is the scope verb that grants the tool.
	Verb string
	// Define builds the tool's definition for one endpoint when a session starts
	// or is refreshed, so its text can quote that endpoint's settings. It is also
	// called once with an empty Endpoint, for the placeholder registered with
	// mcp-go (see verbTools), which no session lists.
	Define func(ep store.Endpoint) mcp.Tool
	// Handle does the work. It returns a JSON object for structuredContent, or an
	// error (an *Error, a store sentinel, or anything else, which becomes
	// unavailable).
	Handle func(ctx context.Context, c *Call) (any, error)
}

// Call is one tool call as a handler sees it.
type Call struct {
	Endpoint store.Endpoint // fresh from the database for this request
	Actor    string         // agent:<agent id>, the owner of claims and the audit actor
	session  *session       // nil when the call is not in a known session
	args     json.RawMessage
}

// Decode reads the call's arguments into dst, refusing unknown fields and wrong
// types as invalid_argument.
func (c *Call) Decode(dst any) error {
	if len(bytes.TrimSpace(c.args)) == 0 || bytes.Equal(bytes.TrimSpace(c.args), []byte("null")) {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(c.args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return errorf(CodeInvalidArgument, "arguments: %s", argumentProblem(err))
	}
	return nil
}

// argumentProblem says what was wrong with the arguments in the agent's terms: the
// argument's name and the JSON type it needs, never Go's names for our structs.
func argumentProblem(err error) string {
	var typeErr *json.UnmarshalTypeError
	var syntaxErr *json.SyntaxError
	switch {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return fmt.Sprintf("%s must be %s, not %s", typeErr.Field, jsonKind(typeErr.Type), typeErr.Value)
	case errors.As(err, &typeErr):
		return fmt.Sprintf("the arguments must be a JSON object, not %s", typeErr.Value)
	case errors.As(err, &syntaxErr):
		return "not valid JSON"
	}
	// "json: unknown field \"x\"" and the like name no Go type.
	return strings.TrimPrefix(err.Error(), "json: ")
}

// jsonKind names the JSON type a Go type decodes from.
func jsonKind(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	case reflect.Pointer:
		return jsonKind(t.Elem())
	}
	return "another type"
}

// ToolSource supplies tools that are not verbs, such as module tools. SessionTools
// returns the tools ep may see, with handlers; it is called when a session starts
// and when RefreshSessions runs. Handlers find the caller with EndpointFromContext.
type ToolSource interface {
	SessionTools(ctx context.Context, ep store.Endpoint) []server.ServerTool
}

// table is every verb the agent serves. Add a verb here (see the package comment).
func (a *Agent) table() []Tool {
	return slices.Concat(a.todoTools(), a.webhookTools(), a.handOnTools())
}

// annotate sets every annotation hint explicitly: mcp.NewTool defaults
// destructiveHint and openWorldHint to true, which would misdescribe every verb.
func annotate(title string, readOnly, destructive, idempotent, openWorld bool) mcp.ToolOption {
	return mcp.WithToolAnnotation(mcp.ToolAnnotation{
		Title:           title,
		ReadOnlyHint:    mcp.ToBoolPtr(readOnly),
		DestructiveHint: mcp.ToBoolPtr(destructive),
		IdempotentHint:  mcp.ToBoolPtr(idempotent),
		OpenWorldHint:   mcp.ToBoolPtr(openWorld),
	})
}

// verbTools is every verb with its handler, registered once on the MCP server.
// Their definitions there are placeholders: each session lists (and may call) only
// its endpoint's granted verbs, defined for that endpoint (verbDefs), through the
// tool filter. Registering them once rather than per session keeps mcp-go from
// copying a session's whole tool map on every tools/call (it clones session tools
// on each lookup), which was an eighth of the bytes a drain allocated. mcp-go
// checks a call against the registered definition only if input schema validation
// is turned on (it is not): that would check it against the placeholder.
func (a *Agent) verbTools() []server.ServerTool {
	out := make([]server.ServerTool, 0, len(a.tools))
	for _, t := range a.tools {
		out = append(out, server.ServerTool{Tool: t.Define(store.Endpoint{}), Handler: a.serve(t)})
	}
	return out
}

// verbDefs defines the verbs ep is granted, as its sessions list them.
func (a *Agent) verbDefs(ep store.Endpoint) map[string]mcp.Tool {
	out := map[string]mcp.Tool{}
	for _, t := range a.tools {
		// Under a ceiling of no webhooks, create_webhook could only ever answer
		// ceiling_exceeded: it is left out until a human raises the ceiling (the
		// other webhook verbs stay, for webhooks a human made for the endpoint).
		if t.Verb == VerbCreateWebhook && ep.Ceiling.MaxWebhooks == 0 {
			continue
		}
		if slices.Contains(ep.Verbs, t.Verb) {
			out[t.Name] = t.Define(ep)
		}
	}
	return out
}

// sessionTools builds the tools of ep's sessions that are not verbs: the sources'.
// A source's tool named like a verb is dropped: mcp-go looks a call up in the
// session's tools first, so it would run in the verb's place.
func (a *Agent) sessionTools(ctx context.Context, ep store.Endpoint) map[string]server.ServerTool {
	out := map[string]server.ServerTool{}
	for _, src := range a.opts.ToolSources {
		for _, st := range src.SessionTools(ctx, ep) {
			if _, clash := a.verbOf[st.Tool.Name]; clash {
				a.log.Warn("tool source offers a tool named like a verb; ignored", "tool", st.Tool.Name)
				continue
			}
			st.Handler = a.limit(st.Tool.Name, false, st.Handler)
			if declaresOutput(st.Tool) {
				st.Handler = refusalsAsText(st.Handler)
			}
			out[st.Tool.Name] = st
		}
	}
	return out
}

// sessionView is mcp-go's tool filter, applied to listings and to each call. A
// verb is seen only in a session of the endpoint in ctx that defined it (at
// initialize, or when the endpoint's tools were rebuilt), only while the endpoint
// still grants it (a verb withdrawn since is neither listed nor callable from the
// next request on), and with that session's definition in place of the
// placeholder. Tools that are not verbs are left to their source, which may hide
// some (see hidingSource).
func (a *Agent) sessionView(ctx context.Context, tools []mcp.Tool) []mcp.Tool {
	ep, ok := EndpointFromContext(ctx)
	if !ok {
		return nil
	}
	var defs map[string]mcp.Tool
	if x := a.sessionOf(ctx, ep); x != nil {
		x.mu.Lock()
		defs = x.defs
		x.mu.Unlock()
	} else if rs, ok := server.ClientSessionFromContext(ctx).(*requestSession); ok {
		defs = rs.built.defs
	}
	hidden := a.hiddenTools(ctx, ep)
	out := tools[:0]
	for _, t := range tools {
		v, isVerb := a.verbOf[t.Name]
		switch {
		case isVerb:
			if def, defined := defs[t.Name]; defined && slices.Contains(ep.Verbs, v) {
				out = append(out, def)
			}
		case !hidden[t.Name]:
			out = append(out, t)
		}
	}
	return out
}

// sessionOf is the live session of the request in ctx, if ep opened it.
func (a *Agent) sessionOf(ctx context.Context, ep store.Endpoint) *session {
	if cs := server.ClientSessionFromContext(ctx); cs != nil {
		if x := a.sessions.get(cs.SessionID()); x != nil && x.endpointID == ep.ID {
			return x
		}
	}
	return nil
}

// declaresOutput says whether a tool's definition declares an outputSchema.
func declaresOutput(t mcp.Tool) bool { return len(t.RawOutputSchema) > 0 || t.OutputSchema.Type != "" }

// refusalsAsText wraps the handler of a source's tool that declares an
// outputSchema: the schema is the source's, and says nothing of the agent's
// refusals (the rate limit's, the grant's, the gateway's), so a client that checks
// structuredContent against it (the official TypeScript SDK does, errors too)
// would throw rather than read the refusal. A refusal of such a tool carries its
// code and message in the text alone; the tool's own results pass as they came.
func refusalsAsText(h server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := h(ctx, req)
		if res != nil {
			if _, refusal := res.StructuredContent.(errorPayload); refusal {
				res.StructuredContent = nil
			}
		}
		return res, err
	}
}

// limit wraps a handler in the endpoint's rate limit; queueVerb says which
// (see limiters.allow).
func (a *Agent) limit(name string, queueVerb bool, h server.ToolHandlerFunc) server.ToolHandlerFunc {
	return func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ep, ok := EndpointFromContext(ctx)
		if !ok {
			return a.toolError(name, errorf(CodeForbidden, "no authenticated endpoint")), nil
		}
		if ok, wait := a.limits.allow(ep, queueVerb); !ok {
			return a.toolError(name, rateLimitedError(wait)), nil
		}
		return h(ctx, req)
	}
}

// serve wraps a verb's handler in everything every verb shares: the endpoint, the
// rate limit, the verb check, argument bytes, the result's two forms, and error
// codes.
func (a *Agent) serve(t Tool) server.ToolHandlerFunc {
	return a.limit(t.Name, slices.Contains(store.TodoVerbs(), t.Verb), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		ep, _ := EndpointFromContext(ctx)
		if err := checkScope(ep, t.Verb); err != nil {
			return a.toolError(t.Name, err), nil
		}
		c := &Call{Endpoint: ep, Actor: "agent:" + ep.AgentID, args: req.Params.RawArguments}
		if c.args == nil && req.Params.Arguments != nil {
			b, err := json.Marshal(req.Params.Arguments)
			if err != nil {
				return a.toolError(t.Name, errorf(CodeInvalidArgument, "arguments: %v", err)), nil
			}
			c.args = b
		}
		c.session = a.sessionOf(ctx, ep)
		out, err := t.Handle(ctx, c)
		if err != nil {
			return a.toolError(t.Name, err), nil
		}
		return result(out)
	})
}

// result carries out as structuredContent and, for clients that read only text,
// as its JSON in a text block.
func result(out any) (*mcp.CallToolResult, error) {
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("agent: encode result: %w", err)
	}
	return &mcp.CallToolResult{
		Content:              []mcp.Content{mcp.NewTextContent(string(b))},
		StructuredContent:    out,
		RawStructuredContent: b,
	}, nil
}
