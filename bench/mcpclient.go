package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/sse"
	"github.com/switchboardhq/switchboard/internal/textcut"
)

// leanClient is the drain phase's agent: MCP over Streamable HTTP (initialize,
// notifications/initialized, tools/call on the session, DELETE at the end), written
// out by hand so that it decodes only the fields it uses, in one pass over each
// answer, on a connection of its own (see wire). The bench runs on the machine it
// measures; mcp-go's client decodes every result into maps and decodes the text
// copy of each structured result as well, which took about a third of a core away
// from the server at 650 todos/s. This one spends a fraction of that.
//
// Over the stateless revision (Target.Protocol 2026-07-28) it has no session:
// each request carries the revision in its headers and its _meta.
//
// A leanClient is used by one goroutine at a time.
type leanClient struct {
	credential string
	wire       *wire
	path       string // of the MCP endpoint
	session    string
	version    string
	stateless  bool
	nextID     int64
}

// leanMeta is a stateless request's _meta.
type leanMeta struct {
	Version string         `json:"io.modelcontextprotocol/protocolVersion"`
	Caps    map[string]any `json:"io.modelcontextprotocol/clientCapabilities"`
}

// meta is the _meta of c's requests: nil in a session.
func (c *leanClient) meta() *leanMeta {
	if !c.stateless {
		return nil
	}
	return &leanMeta{Version: c.version, Caps: map[string]any{}}
}

// sessionEnded is the server's 404 to a call on the client's session: it ended
// the session (evicted it for a newer one of the same endpoint, say).
type sessionEnded struct{ msg string }

func (e *sessionEnded) Error() string { return e.msg }

// oneLine is an error answer's body fit for a one-line message: its first 200
// characters with the whitespace folded, or what it is when it is a web page (a
// proxy's error page, say).
func oneLine(body []byte) string {
	s := strings.Join(strings.Fields(string(body)), " ")
	if low := strings.ToLower(s); strings.HasPrefix(low, "<!doctype html") || strings.HasPrefix(low, "<html") {
		if i, j := strings.Index(low, "<title>"), strings.Index(low, "</title>"); i >= 0 && j > i {
			return "an HTML page titled " + strconv.Quote(s[i+len("<title>"):j])
		}
		return "an HTML page"
	}
	return textcut.Runes(s, 200+1)
}

// callError is a tool's own error answer (isError) or a JSON-RPC error.
type callError struct{ msg string }

func (e *callError) Error() string { return e.msg }

// dialLean opens a session: initialize, then notifications/initialized; or, for
// the stateless revision, asks server/discover whether the server serves it. Each
// call is bounded by timeout (0: by its context alone).
func dialLean(ctx context.Context, t Target, timeout time.Duration) (*leanClient, error) {
	mcpURL := strings.TrimSuffix(t.URL, "/") + "/mcp"
	w, err := newWire(mcpURL, timeout)
	if err != nil {
		return nil, err
	}
	path, err := requestPath(mcpURL)
	if err != nil {
		return nil, err
	}
	c := &leanClient{credential: t.Credential, wire: w, path: path}
	if mcp.IsModernProtocol(t.Protocol) {
		c.stateless, c.version = true, t.Protocol
		params, _ := json.Marshal(map[string]any{"_meta": c.meta()})
		var disc struct {
			SupportedVersions []string `json:"supportedVersions"`
		}
		if _, err := request(ctx, c, "server/discover", "", params, &disc); err != nil {
			w.close()
			return nil, fmt.Errorf("bench: server/discover: %w", err)
		}
		if !slices.Contains(disc.SupportedVersions, t.Protocol) {
			w.close()
			return nil, fmt.Errorf("bench: the server does not serve protocol %s (it serves %v)", t.Protocol, disc.SupportedVersions)
		}
		return c, nil
	}
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": cmp.Or(t.Protocol, agent.SessionProtocolVersion),
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]string{"name": "switchboard-bench", "version": "1"},
	})
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	resp, err := request(ctx, c, "initialize", "", params, &init)
	if err != nil {
		w.close()
		return nil, fmt.Errorf("bench: initialize: %w", err)
	}
	sid := resp.Header.Get("Mcp-Session-Id")
	if sid == "" || init.ProtocolVersion == "" {
		w.close()
		return nil, fmt.Errorf("bench: initialize: the server gave no session id or protocol version")
	}
	c.session, c.version = sid, init.ProtocolVersion
	resp, _, err = c.post(ctx, http.MethodPost, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), "", "")
	if err != nil {
		w.close()
		return nil, fmt.Errorf("bench: notifications/initialized: %w", err)
	}
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		w.close()
		return nil, fmt.Errorf("bench: notifications/initialized: HTTP %d", resp.StatusCode)
	}
	return c, nil
}

// leanCall calls a tool and decodes its structuredContent into a T. A tool error
// (isError) comes back as a *callError carrying the tool's text.
func leanCall[T any](ctx context.Context, c *leanClient, name string, args any) (*T, error) {
	params, err := json.Marshal(struct {
		Meta      *leanMeta `json:"_meta,omitempty"`
		Name      string    `json:"name"`
		Arguments any       `json:"arguments"`
	}{c.meta(), name, args})
	if err != nil {
		return nil, err
	}
	var res struct {
		IsError           bool `json:"isError"`
		StructuredContent *T   `json:"structuredContent"`
		// Read only for an error's text: left raw, it is not unescaped.
		Content json.RawMessage `json:"content"`
	}
	if _, err := request(ctx, c, "tools/call", name, params, &res); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		var content []struct {
			Text string `json:"text"`
		}
		msg := "tool error"
		if json.Unmarshal(res.Content, &content) == nil && len(content) > 0 {
			msg = content[0].Text
		}
		return nil, &callError{fmt.Sprintf("%s: %s", name, msg)}
	}
	if res.StructuredContent == nil {
		return nil, fmt.Errorf("%s: the result has no structuredContent", name)
	}
	return res.StructuredContent, nil
}

// close ends the session, giving the server a few seconds to answer, and closes
// the connection.
func (c *leanClient) close() {
	defer c.wire.close()
	if c.stateless {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c.post(ctx, http.MethodDelete, nil, "", "")
}

// request sends one JSON-RPC request (of a tool, name) and decodes its result into
// out, in one pass over the answer.
func request[T any](ctx context.Context, c *leanClient, method, name string, params json.RawMessage, out *T) (*http.Response, error) {
	c.nextID++
	id := c.nextID
	body := make([]byte, 0, 64+len(params))
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = strconv.AppendInt(body, id, 10)
	body = append(body, `,"method":`...)
	body = strconv.AppendQuote(body, method)
	body = append(body, `,"params":`...)
	body = append(body, params...)
	body = append(body, '}')
	resp, data, err := c.post(ctx, http.MethodPost, body, method, name)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound && c.session != "" {
		return nil, &sessionEnded{fmt.Sprintf("HTTP 404: %s", oneLine(data))}
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, oneLine(data))
	}
	msg, err := answer(resp, data, id)
	if err != nil {
		return nil, err
	}
	rpc := struct {
		Result *T `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{Result: out}
	if err := json.Unmarshal(msg, &rpc); err != nil {
		return nil, fmt.Errorf("decode answer: %w", err)
	}
	if rpc.Error != nil {
		return nil, &callError{fmt.Sprintf("JSON-RPC error %d: %s", rpc.Error.Code, rpc.Error.Message)}
	}
	return resp, nil
}

// post sends body (nil for none) with the session's headers, or the stateless
// revision's (the JSON-RPC method rpc, and the tool name, if any).
func (c *leanClient) post(ctx context.Context, method string, body []byte, rpc, name string) (*http.Response, []byte, error) {
	h := make([]string, 0, 14)
	h = append(h, "Authorization", "Bearer "+c.credential)
	switch {
	case c.session != "":
		h = append(h, "Mcp-Session-Id", c.session, "Mcp-Protocol-Version", c.version)
	case c.stateless:
		h = append(h, "Mcp-Protocol-Version", c.version, "Mcp-Method", rpc)
		if name != "" {
			h = append(h, "Mcp-Name", name)
		}
	}
	if body != nil {
		h = append(h, "Content-Type", "application/json", "Accept", "application/json, text/event-stream")
	}
	return c.wire.do(ctx, method, c.path, h, body)
}

// maxAnswer bounds one answer.
const maxAnswer = 16 << 20

// answer returns the JSON-RPC message that answers id: the body itself for
// application/json, or the matching event of a text/event-stream (the server may
// stream notifications ahead of the answer).
func answer(resp *http.Response, data []byte, id int64) ([]byte, error) {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		return data, nil
	case "text/event-stream":
		// Notifications may come first: the answer is the event with our id and
		// no method.
		var found []byte
		err := sse.Read(bytes.NewReader(data), maxAnswer, func(ev sse.Event) error {
			var m struct {
				ID     *int64 `json:"id"`
				Method string `json:"method"`
			}
			if json.Unmarshal(ev.Data, &m) == nil && m.ID != nil && *m.ID == id && m.Method == "" {
				found = append([]byte(nil), ev.Data...)
				return errFound
			}
			return nil
		})
		if found != nil {
			return found, nil
		}
		if err != nil {
			return nil, err
		}
		return nil, errors.New("the event stream ended without the answer")
	default:
		return nil, fmt.Errorf("unexpected Content-Type %q", resp.Header.Get("Content-Type"))
	}
}

// errFound stops reading an event stream at the answer.
var errFound = errors.New("found")
