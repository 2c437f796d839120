package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// fastCall answers a tools/call of a queue verb on a live session itself, and
// reports whether it did; anything else goes on to mcp-go, as does a call this
// path is not sure of. The verbs are what agents call all day (claim_next,
// complete), and mcp-go spends several times what the verb does on each: a
// goroutine and channels to stream notifications, the message parsed six times,
// and a result whose 2 KB payload is compacted three times over on its way out.
// Here the call is parsed once, runs the same handler mcp-go would run (scope,
// rate limit, the verb) with the same session in its context, and its answer is
// written with the structured result's bytes as they are.
//
// What mcp-go would do and this path does not, and how each is kept:
//   - notifications queued for the session are streamed on a POST's answer: a
//     session sent tools/list_changed goes through mcp-go until a request that
//     mcp-go answers has taken it (a doorbell is sent only to a session with a
//     GET stream, which takes it);
//   - mcp-go's idle sweep hears only the requests mcp-go answers: the agent sweeps
//     idle sessions itself (sweepIdle), and mcp-go's is off;
//   - notifications/cancelled cancels a call in flight: a verb is one short write;
//     a client that goes away still cancels it, through the request's context;
//   - a request that reuses the id of one still in flight on the session is
//     refused: the fast path answers it (reusing an id in flight is the
//     client's error, and the first request is answered either way).
//
// Only the session-ful revisions' plain shape is taken: JSON, a protocol version
// header this server serves, a single request with an integer or string id, no
// result member, params without _meta, task or multi-round-trip answers, and
// no member given twice or unknown to this path (plainMembers).
func (a *Agent) fastCall(ctx context.Context, w http.ResponseWriter, r *http.Request, x *session, body []byte, env *envelope) bool {
	if a.fastOff.Load() || env == nil || x.noticesWaiting() || !fastVersion(r.Header) {
		return false
	}
	p := &env.Params.call
	if env.JSONRPC != mcp.JSONRPC_VERSION || env.Method != string(mcp.MethodToolsCall) || !plainID(env.ID) ||
		!absent(env.Result) || !absent(env.Params.Meta) || !absent(env.Params.Task) ||
		!absent(p.Meta) || !absent(p.Task) || !absent(p.InputResponses) || !absent(p.RequestState) || !plainMembers(body) {
		return false
	}
	req := p.request(r.Header)
	handler, isVerb := a.fast[req.Params.Name]
	if !isVerb {
		return false
	}
	ep, _ := EndpointFromContext(ctx)
	x.mu.Lock()
	cs, defs := x.tools, x.defs
	x.mu.Unlock()
	// The session must list the verb (as mcp-go's tool filter would let it be
	// called); a call of one it does not list goes to mcp-go, which refuses it.
	if _, listed := defs[req.Params.Name]; cs == nil || !listed || !slices.Contains(ep.Verbs, a.verbOf[req.Params.Name]) {
		return false
	}

	a.runFast(a.mcp.WithContext(ctx, cs), w, env.ID, handler, req, nil)
	return true
}

// runFast runs a verb's handler for fastCall or fastStateless and writes its
// answer, with the stateless revision's members when head is not nil.
func (a *Agent) runFast(ctx context.Context, w http.ResponseWriter, id json.RawMessage, handler server.ToolHandlerFunc,
	req mcp.CallToolRequest, head *resultHead) {
	noteCall(ctx, nil, &req)
	res, err := runRecovered(ctx, handler, req)
	buf, _ := a.answers.Get().(*[]byte)
	if buf == nil {
		buf = new([]byte)
	}
	var out []byte
	if err == nil && res == nil {
		err = fmt.Errorf("tool %s returned no result", req.Params.Name)
	}
	if err == nil {
		out, err = appendResponse((*buf)[:0], id, res, head)
	}
	if err != nil {
		out = appendError((*buf)[:0], id, mcp.INTERNAL_ERROR, err.Error())
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(http.StatusOK)
	w.Write(out)
	a.fastAnswered.Add(1)
	// A Write keeps none of its bytes (io.Writer's contract): the buffer takes
	// the next answer, unless it grew past what answers usually need.
	if cap(out) <= maxPooledAnswer {
		*buf = out[:0]
		a.answers.Put(buf)
	}
}

// maxPooledAnswer is the largest answer buffer runFast keeps for the next: a
// claimed todo's answer is its payload twice and some, and a list's can be
// larger, rarely.
const maxPooledAnswer = 64 << 10

// envelope is what fastCall and mcpAnswers read of a POST's JSON-RPC message,
// parsed once for both (readEnvelope). A member given twice keeps what the first
// gave unless the second replaces it, as in the plain structs mcp-go decides a
// message's kind and revision with.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  json.RawMessage `json:"result"` // mcp-go takes a message with one for a response
	Params  envParams       `json:"params"`
}

// envParams is what the envelope reads of params: the members given in any
// params member of the message, merged, and, in call, what the last params
// member gave (the fast paths take no message with two: plainMembers).
type envParams struct {
	Meta json.RawMessage `json:"_meta"`
	Task json.RawMessage `json:"task"`
	Name string          `json:"name"` // for the stateless revision's Mcp-Name (standardHeaders)
	URI  string          `json:"uri"`
	call callParams
}

// callParams is what a verb's call reads of params: its arguments left as they
// came (a verb decodes them into its own struct), and the members that send a
// call to mcp-go when present. mcp-go's own decoder would also read arguments
// and _meta into maps that no verb looks at.
type callParams struct {
	Name           string          `json:"name"`
	Arguments      json.RawMessage `json:"arguments"`
	Meta           json.RawMessage `json:"_meta"`
	Task           json.RawMessage `json:"task"`
	InputResponses json.RawMessage `json:"inputResponses"`
	RequestState   json.RawMessage `json:"requestState"`
}

// UnmarshalJSON reads one params member in one pass, for both readings: the
// merged one takes each member given (name and uri unless null, as a plain
// struct does).
func (p *envParams) UnmarshalJSON(b []byte) error {
	var m struct {
		Name *string `json:"name"`
		URI  *string `json:"uri"`
		callParams
	}
	err := json.Unmarshal(b, &m)
	if m.Name != nil {
		p.Name, m.callParams.Name = *m.Name, *m.Name
	}
	if m.URI != nil {
		p.URI = *m.URI
	}
	if len(m.Meta) > 0 {
		p.Meta = m.Meta
	}
	if len(m.Task) > 0 {
		p.Task = m.Task
	}
	p.call = m.callParams
	return err
}

// request is the call as a verb's handler reads it: its name, its arguments as
// raw JSON, and the HTTP headers it came with.
func (p *callParams) request(h http.Header) mcp.CallToolRequest {
	var req mcp.CallToolRequest
	req.Method = string(mcp.MethodToolsCall)
	req.Params.Name, req.Params.RawArguments = p.Name, p.Arguments
	req.Header = h
	return req
}

// readEnvelope parses a POST's message when it is JSON by its Content-Type and by
// its body; otherwise it returns nil, and mcp-go refuses or answers it alone.
func readEnvelope(h http.Header, body []byte) *envelope {
	if !jsonContent(h) {
		return nil
	}
	env := new(envelope)
	if json.Unmarshal(body, env) != nil {
		return nil
	}
	return env
}

// jsonContent says whether a POST's Content-Type is JSON's.
func jsonContent(h http.Header) bool {
	ct, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	return err == nil && ct == "application/json"
}

// absent says whether a member was left out or given as null.
func absent(v json.RawMessage) bool { return len(v) == 0 || string(v) == "null" }

// mcpAnswers says whether mcp-go will answer a POST of a session, whose message
// is env (nil: not JSON), as a request: then it streams the notifications waiting
// for the session ahead of the answer. It does not for a notification or a
// response (202), nor for a message it refuses before reading (its Content-Type,
// its protocol version); a request of the stateless revision has no session.
// When in doubt, no.
func mcpAnswers(h http.Header, env *envelope) bool {
	if v := h.Get(mcp.HeaderProtocolVersion); v != "" && (!mcp.IsValidProtocolVersion(v) || mcp.IsModernProtocol(v)) {
		return false
	}
	return env != nil && env.Method != "" && !absent(env.ID) && absent(env.Result) && absent(env.Params.Meta)
}

// fastVersion says whether a POST names a protocol version fastCall takes: one
// of the session-ful revisions this server serves.
func fastVersion(h http.Header) bool {
	v := h.Get(mcp.HeaderProtocolVersion)
	return v != "" && !mcp.IsModernProtocol(v) && slices.Contains(SupportedProtocolVersions, v)
}

// plainID says whether a JSON-RPC id is one the answer can carry back byte for
// byte as mcp-go would write it (echoID): an integer other than -0, or a string
// of printable ASCII without escapes or the characters json.Marshal escapes.
func plainID(id json.RawMessage) bool {
	if len(id) == 0 {
		return false
	}
	if id[0] == '"' {
		if len(id) < 2 || id[len(id)-1] != '"' {
			return false
		}
		for _, c := range id[1 : len(id)-1] {
			if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
		}
		return true
	}
	_, err := strconv.ParseInt(string(id), 10, 64)
	return err == nil && string(id) != "-0"
}

// messageID is a request's id as mcp-go's message handler writes it back in a
// refusal: any JSON value, a number as echoID writes it; null when absent.
func messageID(raw json.RawMessage) json.RawMessage {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if absent(raw) || d.Decode(&v) != nil {
		return json.RawMessage("null")
	}
	if _, number := v.(json.Number); number {
		return echoID(raw)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// echoID is a request's id as mcp-go writes it back in its answer: read as
// mcp.RequestId reads it (a whole number as an integer) and marshalled; null
// when absent or not an id.
func echoID(raw json.RawMessage) json.RawMessage {
	var id mcp.RequestId
	if len(bytes.TrimSpace(raw)) == 0 || json.Unmarshal(raw, &id) != nil {
		return json.RawMessage("null")
	}
	b, err := json.Marshal(id)
	if err != nil {
		return json.RawMessage("null")
	}
	return b
}

// runRecovered runs a tool handler as mcp-go's WithRecovery would: a panic is the
// call's error.
func runRecovered(ctx context.Context, h server.ToolHandlerFunc, req mcp.CallToolRequest) (res *mcp.CallToolResult, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic recovered in %s tool handler: %v", req.Params.Name, p)
		}
	}()
	return h(ctx, req)
}

// resultHead is what the stateless revision adds to every result: resultType,
// and serverInfo in _meta, as mcp-go adds them; text is the two as the opening
// members of a JSON object, each followed by a comma.
type resultHead struct {
	info mcp.Implementation
	text string
}

func newResultHead(info mcp.Implementation) *resultHead {
	b, _ := json.Marshal(info)
	return &resultHead{info: info, text: `"resultType":"` + string(mcp.ResultTypeComplete) + `","_meta":{"` +
		mcp.MetaKeyServerInfo + `":` + string(b) + `},`}
}

// appendResponse appends the JSON-RPC answer carrying res, with head's members
// unless head is nil. A verb's result (one text block holding the structured
// result's JSON, see result) is written out here; anything else as mcp-go
// writes it.
func appendResponse(b []byte, id json.RawMessage, res *mcp.CallToolResult, head *resultHead) ([]byte, error) {
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"result":`...)
	if text, ok := verbResultText(res); ok {
		b = append(b, '{')
		if head != nil {
			b = append(b, head.text...)
		}
		b = append(b, `"content":[{"type":"text","text":`...)
		b = appendJSONString(b, text)
		b = append(b, `}],"structuredContent":`...)
		b = append(b, res.RawStructuredContent...)
		b = append(b, '}')
	} else {
		if head != nil {
			res.ResultType = mcp.ResultTypeComplete
			if res.Meta == nil {
				res.Meta = &mcp.Meta{}
			}
			res.Meta.SetMetaField(mcp.MetaKeyServerInfo, head.info)
		}
		enc, err := json.Marshal(res)
		if err != nil {
			return nil, err
		}
		b = append(b, enc...)
	}
	return append(b, "}\n"...), nil
}

// verbResultText is the text of a result of result's shape: one plain text block,
// and the structured result's JSON as json.Marshal wrote it (so it is not checked
// again), nothing else. A refusal (isError) is not of that shape.
func verbResultText(res *mcp.CallToolResult) (string, bool) {
	if res.IsError || res.Meta != nil || res.ResultType != "" || len(res.InputRequests) > 0 || res.RequestState != "" ||
		len(res.Content) != 1 || len(res.RawStructuredContent) == 0 {
		return "", false
	}
	tc, ok := res.Content[0].(mcp.TextContent)
	if !ok || tc.Annotations != nil || tc.Meta != nil || tc.Type != "text" {
		return "", false
	}
	return tc.Text, true
}

// appendError appends a JSON-RPC error answer.
func appendError(b []byte, id json.RawMessage, code int, msg string) []byte {
	enc, _ := json.Marshal(msg)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"error":{"code":`...)
	b = strconv.AppendInt(b, int64(code), 10)
	b = append(b, `,"message":`...)
	b = append(b, enc...)
	return append(b, "}}\n"...)
}

// appendJSONString appends s as a JSON string, byte for byte as json.Marshal
// writes it. A verb's text is JSON that json.Marshal wrote, in which only quotes
// and backslashes need escaping again; this writes those itself, in place, and
// leaves a string with anything else to escape (a control character, <, > or &,
// U+2028, U+2029, bytes that are not UTF-8) to json.Marshal.
func appendJSONString(b []byte, s string) []byte {
	n := len(b)
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b = append(b, s[start:i]...)
			b = append(b, '\\', c)
			i++
			start = i
		case c >= 0x20 && c < utf8.RuneSelf && c != '<' && c != '>' && c != '&':
			i++
		case c >= utf8.RuneSelf:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
				return appendMarshaled(b[:n], s)
			}
			i += size
		default:
			return appendMarshaled(b[:n], s)
		}
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendMarshaled(b []byte, s string) []byte {
	enc, _ := json.Marshal(s) // a string always encodes
	return append(b, enc...)
}
