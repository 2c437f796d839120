package modules

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

var (
	// ErrUnavailable means the module that owns the tool is not up (starting,
	// crashed, backing off, stopped) or its session broke during the call.
	// Agents see it as the "unavailable" error code.
	ErrUnavailable = errors.New("modules: module unavailable")
	// ErrUnknownTool means no module advertises the tool.
	ErrUnknownTool = errors.New("modules: unknown tool")
	// ErrWithheld means the tool's definition changed since it was pinned and
	// a human has not approved the new one yet.
	ErrWithheld = errors.New("modules: tool withheld until its changed definition is approved")
	// ErrArguments means a call's arguments are neither absent nor a JSON
	// object, the only shapes tools/call allows. Agents see it as the
	// "invalid_argument" error code.
	ErrArguments = errors.New("modules: arguments must be a JSON object")
)

// RPCError is a JSON-RPC error the module answered with (for example an
// unknown tool or invalid params); the module stayed healthy.
type RPCError struct {
	Code    int
	Message string
}

// Error carries the module's message escaped and bounded (see shownText): it
// reaches the log, the module's status and agents.
func (e *RPCError) Error() string {
	return fmt.Sprintf("modules: module answered error %d: %s", e.Code, shownText(e.Message, maxShownError))
}

const (
	maxListPages    = 100
	cancelNotifyTTL = 5 * time.Second
)

// session is the gateway's one MCP client session with a module (over its
// stdio) or a remote MCP server (over Streamable HTTP). mcp-go's client
// performs the initialize handshake and answers the server's pings;
// tools/list and tools/call go through the transport directly so that
// definitions and results stay the server's own JSON, byte for byte.
type session struct {
	client *client.Client
	tr     transport.Interface
	frames *frameReader // a module's stdout; nil for a remote server
	ids    atomic.Int64
	calls  callsInFlight // tools/call in flight, for elicitation (see elicitation.go)

	// alive is cancelled when the session can no longer answer: the process
	// exited, stdout broke, or the gateway closed it. Requests in flight then
	// fail with ErrUnavailable instead of waiting for their deadline.
	alive context.Context
	kill  context.CancelFunc

	// refusals: a 4xx answer to a request is that request's error (httpRefusal),
	// over Streamable HTTP, where a lost session shows in its header.
	refusals bool
}

// openSession starts the client over the module's pipes and initializes it.
// onListChanged must not block: it runs on the transport's read loop.
// onLog, if set, gets each MCP log message (notifications/message) as a line; it
// must not block either.
func openSession(ctx context.Context, stdout io.Reader, stdin io.WriteCloser, version string, onListChanged func(), onLog func(string)) (*session, error) {
	frames := newFrameReader(stdout)
	s := newSession(transport.NewIO(frames, stdin, nil), frames, true)
	go func() {
		<-frames.ended
		s.kill()
	}()
	if err := s.initialize(ctx, version, onListChanged, onLog); err != nil {
		return nil, err
	}
	return s, nil
}

// relay says whether the session relays the server's elicitation requests to
// the caller of the call in flight (a stdio module's), declaring the capability.
func newSession(tr transport.Interface, frames *frameReader, relay bool) *session {
	// The legacy (initialize) protocol is pinned on purpose: in 2026-07-28
	// notifications are opt-in per request stream, while a module's
	// unsolicited notifications/tools/list_changed is what keeps our catalog
	// current. It also skips a server/discover probe that costs older
	// servers a timeout.
	s := &session{tr: tr, frames: frames}
	opts := []client.ClientOption{client.WithProtocolVersion(mcp.LATEST_LEGACY_PROTOCOL_VERSION)}
	if relay {
		opts = append(opts, client.WithElicitationHandler(elicitationRelay{&s.calls}))
	}
	s.client = client.NewClient(tr, opts...)
	s.alive, s.kill = context.WithCancel(context.Background())
	return s
}

// initialize starts the client and makes the initialize handshake; on failure
// the session is closed.
func (s *session) initialize(ctx context.Context, version string, onListChanged func(), onLog func(string)) error {
	c := s.client
	// Start's context lives as long as the transport: it is the context of
	// requests the server sends us (pings).
	if err := c.Start(s.alive); err != nil {
		s.close()
		return fmt.Errorf("start client: %w", err)
	}
	c.OnNotification(func(n mcp.JSONRPCNotification) {
		switch n.Method {
		case string(mcp.MethodNotificationToolsListChanged):
			onListChanged()
		case "notifications/message":
			if onLog != nil {
				onLog(logLine(n.Params.AdditionalFields))
			}
		}
	})
	req := mcp.InitializeRequest{}
	req.Params.ProtocolVersion = mcp.LATEST_LEGACY_PROTOCOL_VERSION
	req.Params.ClientInfo = mcp.Implementation{Name: "switchboard", Version: version}
	initCtx, release := s.bound(ctx)
	defer release()
	if _, err := c.Initialize(initCtx, req); err != nil {
		s.close()
		if reason := s.brokenReason(); reason != nil {
			return fmt.Errorf("initialize: %w", reason)
		}
		return fmt.Errorf("initialize: %w", err)
	}
	return nil
}

// bound returns ctx, additionally cancelled when the session dies, and the
// function that releases it.
func (s *session) bound(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.alive, cancel)
	return ctx, func() { stop(); cancel() }
}

// brokenReason reports why stdout ended, or nil while it is open.
func (s *session) brokenReason() error {
	if s.frames == nil {
		return nil
	}
	select {
	case <-s.frames.ended:
		return s.frames.reason
	default:
		return nil
	}
}

func (s *session) done() <-chan struct{} { return s.alive.Done() }

func (s *session) close() {
	s.kill()
	_ = s.tr.Close()
}

// request sends one JSON-RPC request and returns the raw result.
func (s *session) request(ctx context.Context, method string, params any) (json.RawMessage, error) {
	if s.alive.Err() != nil {
		return nil, ErrUnavailable
	}
	// String ids keep ours apart from the numeric ids mcp-go's client uses.
	id := mcp.NewRequestId("sb-" + strconv.FormatInt(s.ids.Add(1), 10))
	call, release := s.bound(ctx)
	defer release()
	resp, err := s.tr.SendRequest(call, transport.JSONRPCRequest{
		JSONRPC: mcp.JSONRPC_VERSION, ID: id, Method: method, Params: params,
	})
	if err != nil {
		if ctx.Err() != nil {
			s.cancelled(id, ctx.Err())
			return nil, fmt.Errorf("modules: %s: %w", method, ctx.Err())
		}
		if refused := httpRefusal(err); s.refusals && refused != nil {
			return nil, refused
		}
		if s.refusals && (errors.Is(err, errAnswerCap) || errors.Is(err, transport.ErrMessageTooLarge)) {
			// One answer too long: the server and its session are sound.
			return nil, &RPCError{Code: mcp.INTERNAL_ERROR, Message: fmt.Sprintf("the remote server's answer "+
				"is over the %d MiB cap of one answer: ask for less", maxRemoteAnswer>>20)}
		}
		return nil, fmt.Errorf("%w: %s: %v", ErrUnavailable, method, err)
	}
	if resp.Error != nil {
		return nil, &RPCError{Code: resp.Error.Code, Message: resp.Error.Message}
	}
	return resp.Result, nil
}

// cancelled tells the module to stop working on a request we gave up on;
// over stdio that notification is the only way to cancel. Best effort.
func (s *session) cancelled(id mcp.RequestId, cause error) {
	n := mcp.JSONRPCNotification{
		JSONRPC: mcp.JSONRPC_VERSION,
		Notification: mcp.Notification{
			Method: string(mcp.MethodNotificationCancelled),
			Params: mcp.NotificationParams{AdditionalFields: map[string]any{"requestId": id, "reason": cause.Error()}},
		},
	}
	go func() {
		ctx, cancel := context.WithTimeout(s.alive, cancelNotifyTTL)
		defer cancel()
		_ = s.tr.SendNotification(ctx, n)
	}()
}

// upstreamTool is one tool as the module advertised it.
type upstreamTool struct {
	Name string
	Def  json.RawMessage
}

// listTools pages through tools/list, keeping every definition raw. A
// definition that is not an object with exactly one name member (spelled
// "name": encoding/json would also read "NAME"), or a name advertised more than
// once, is refused (every copy of it) rather than failing the listing.
// refusedNames[i] is the name refused[i] was advertised under, as far as one can
// be read ("" if none), so that include_tools can select among refusals. Refusals
// with a name come first. Past maxRefusedShown, definitions with no readable name
// are only counted (nameless): each would be kept as a preview, which a listing of
// tiny junk would otherwise multiply in memory. A malformed page, too many pages
// or a repeating cursor fail the listing.
func (s *session) listTools(ctx context.Context) (tools []upstreamTool, refused []RefusedTool, refusedNames []string, nameless int, err error) {
	var n int
	var junk []RefusedTool // refusals without a readable name, appended last
	seenCursor := map[string]bool{}
	count := map[string]int{}
	cursor := ""
	for page := 0; ; page++ {
		if page == maxListPages {
			return nil, nil, nil, 0, fmt.Errorf("modules: tools/list: more than %d pages", maxListPages)
		}
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		raw, err := s.request(ctx, string(mcp.MethodToolsList), params)
		if err != nil {
			return nil, nil, nil, 0, err
		}
		var res struct {
			Tools      []json.RawMessage `json:"tools"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal(raw, &res); err != nil {
			return nil, nil, nil, 0, fmt.Errorf("modules: tools/list: decode result: %w", err)
		}
		for _, def := range res.Tools {
			n++
			name, exact := readName(def)
			if exact {
				count[name]++
				tools = append(tools, upstreamTool{Name: name, Def: def})
				continue
			}
			reason := "not a JSON object with exactly one \"name\" (a string; no other spelling of it): " + shown(preview(def))
			if name != "" {
				refused = append(refused, RefusedTool{Upstream: shown(name), Reason: reason})
				refusedNames = append(refusedNames, name)
				continue
			}
			if len(junk) >= maxRefusedShown {
				nameless++
				continue
			}
			junk = append(junk, RefusedTool{Upstream: fmt.Sprintf("(tool %d of the listing)", n), Reason: reason})
		}
		if res.NextCursor == "" {
			break
		}
		if seenCursor[res.NextCursor] {
			return nil, nil, nil, 0, fmt.Errorf("modules: tools/list: cursor \"%s\" repeats", shown(res.NextCursor))
		}
		seenCursor[res.NextCursor] = true
		cursor = res.NextCursor
	}
	unique := tools[:0]
	for _, t := range tools {
		switch c := count[t.Name]; {
		case c == 1:
			unique = append(unique, t)
		case c > 1:
			refused = append(refused, RefusedTool{Upstream: shown(t.Name), Reason: fmt.Sprintf("advertised %d times", c)})
			refusedNames = append(refusedNames, t.Name)
			count[t.Name] = 0 // refused once, whatever the number of copies
		}
	}
	for range junk {
		refusedNames = append(refusedNames, "")
	}
	return unique, append(refused, junk...), refusedNames, nameless, nil
}

// readName reads the name of a tools/list definition. exact is true when def is an
// object with exactly one member whose key is "name" in any case, spelled "name",
// holding a non-empty string: encoding/json reads "NAME" too, and the last one
// wins, so another spelling could name the tool behind the back of the member the
// gateway checks and renames. Otherwise name is what the definition could be
// taken to be named, for the refusal: the string under "name", else under the
// first other spelling (in sorted order), or "".
func readName(def json.RawMessage) (name string, exact bool) {
	dec := json.NewDecoder(bytes.NewReader(def))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return "", false
	}
	spellings, members := map[string]json.RawMessage{}, 0 // the last value under each spelling
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return "", false
		}
		key, _ := tok.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return "", false
		}
		if strings.EqualFold(key, "name") {
			spellings[key] = v
			members++
		}
	}
	keys := slices.SortedFunc(maps.Keys(spellings), func(a, b string) int {
		switch {
		case a == "name":
			return -1
		case b == "name":
			return 1
		}
		return strings.Compare(a, b)
	})
	for _, k := range keys {
		if json.Unmarshal(spellings[k], &name) == nil && name != "" {
			return name, members == 1 && k == "name"
		}
		name = ""
	}
	return "", false
}

// callTool forwards tools/call and returns the module's result unchanged.
func (s *session) callTool(ctx context.Context, upstream string, args json.RawMessage) (json.RawMessage, error) {
	params := struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
	}{Name: upstream}
	if !noArguments(args) {
		params.Arguments = args
	}
	defer s.calls.add(ctx)()
	return s.request(ctx, string(mcp.MethodToolsCall), params)
}

// CheckArguments answers ErrArguments unless args are absent or a JSON object:
// Call checks it first, and a catalog that stands in for the supervisor does too.
func CheckArguments(args json.RawMessage) error {
	if noArguments(args) || json.Valid(args) && firstByte(args) == '{' {
		return nil
	}
	return ErrArguments
}

func noArguments(args json.RawMessage) bool { return len(args) == 0 || string(args) == "null" }

func firstByte(b []byte) byte {
	for _, c := range b {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		}
		return c
	}
	return 0
}

// logLine is an MCP log message as one line: "log LEVEL [LOGGER]: DATA", the data
// as it came when it is text, else as JSON.
func logLine(params map[string]any) string {
	level, _ := params["level"].(string)
	line := "log " + level
	if logger, ok := params["logger"].(string); ok && logger != "" {
		line += " [" + logger + "]"
	}
	data, ok := params["data"].(string)
	if !ok {
		b, _ := json.Marshal(params["data"])
		data = string(b)
	}
	return line + ": " + data
}
