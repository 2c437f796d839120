package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/sse"
)

// leanClient is the drain phase's agent: MCP over Streamable HTTP (initialize,
// notifications/initialized, tools/call on the session, DELETE at the end), written
// out by hand so that it decodes only the fields it uses. The bench runs on the
// machine it measures; mcp-go's client decodes every result into maps and decodes
// the text copy of each structured result as well, which took about a third of a
// core away from the server at 650 todos/s. This one spends a fraction of that.
type leanClient struct {
	url, credential string
	http            *http.Client
	session         string
	version         string
	nextID          atomic.Int64
}

// callError is a tool's own error answer (isError) or a JSON-RPC error.
type callError struct{ msg string }

func (e *callError) Error() string { return e.msg }

// dialLean opens a session: initialize, then notifications/initialized.
func dialLean(ctx context.Context, t Target, httpc *http.Client) (*leanClient, error) {
	c := &leanClient{url: strings.TrimSuffix(t.URL, "/") + "/mcp", credential: t.Credential, http: httpc}
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": agent.SupportedProtocolVersions[0],
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]string{"name": "switchboard-bench", "version": "1"},
	})
	var init struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	sid, err := c.request(ctx, "initialize", params, &init)
	if err != nil {
		return nil, fmt.Errorf("bench: initialize: %w", err)
	}
	if sid == "" || init.ProtocolVersion == "" {
		return nil, fmt.Errorf("bench: initialize: the server gave no session id or protocol version")
	}
	c.session, c.version = sid, init.ProtocolVersion
	resp, err := c.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	if err != nil {
		return nil, fmt.Errorf("bench: notifications/initialized: %w", err)
	}
	drainClose(resp)
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("bench: notifications/initialized: HTTP %d", resp.StatusCode)
	}
	return c, nil
}

// callTool calls a tool and decodes its structuredContent into out. A tool error
// (isError) comes back as a *callError carrying the tool's text.
func (c *leanClient) callTool(ctx context.Context, name string, args any, out any) error {
	params, err := json.Marshal(struct {
		Name      string `json:"name"`
		Arguments any    `json:"arguments"`
	}{name, args})
	if err != nil {
		return err
	}
	var res struct {
		IsError           bool            `json:"isError"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		Content           []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	if _, err := c.request(ctx, "tools/call", params, &res); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if res.IsError {
		msg := "tool error"
		if len(res.Content) > 0 {
			msg = res.Content[0].Text
		}
		return &callError{fmt.Sprintf("%s: %s", name, msg)}
	}
	if len(res.StructuredContent) == 0 {
		return fmt.Errorf("%s: the result has no structuredContent", name)
	}
	if err := json.Unmarshal(res.StructuredContent, out); err != nil {
		return fmt.Errorf("%s: decode result: %w", name, err)
	}
	return nil
}

// close ends the session, giving the server a few seconds to answer.
func (c *leanClient) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, c.url, nil)
	if err != nil {
		return
	}
	c.headers(req)
	if resp, err := c.http.Do(req); err == nil {
		drainClose(resp)
	}
}

// request sends one JSON-RPC request and decodes its result into out. It returns
// the Mcp-Session-Id the answer carried.
func (c *leanClient) request(ctx context.Context, method string, params json.RawMessage, out any) (string, error) {
	id := c.nextID.Add(1)
	body := make([]byte, 0, 64+len(params))
	body = append(body, `{"jsonrpc":"2.0","id":`...)
	body = strconv.AppendInt(body, id, 10)
	body = append(body, `,"method":`...)
	body = strconv.AppendQuote(body, method)
	body = append(body, `,"params":`...)
	body = append(body, params...)
	body = append(body, '}')
	resp, err := c.post(ctx, body)
	if err != nil {
		return "", err
	}
	defer drainClose(resp)
	if resp.StatusCode != http.StatusOK {
		text, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return "", fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(text))
	}
	msg, err := answer(resp, id)
	if err != nil {
		return "", err
	}
	var rpc struct {
		ID     int64           `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(msg, &rpc); err != nil {
		return "", fmt.Errorf("decode answer: %w", err)
	}
	if rpc.Error != nil {
		return "", &callError{fmt.Sprintf("JSON-RPC error %d: %s", rpc.Error.Code, rpc.Error.Message)}
	}
	if err := json.Unmarshal(rpc.Result, out); err != nil {
		return "", fmt.Errorf("decode result: %w", err)
	}
	return resp.Header.Get("Mcp-Session-Id"), nil
}

func (c *leanClient) post(ctx context.Context, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	c.headers(req)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	return c.http.Do(req)
}

func (c *leanClient) headers(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+c.credential)
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
}

// maxAnswer bounds one answer, JSON or one streamed event.
const maxAnswer = 16 << 20

// answer returns the JSON-RPC message that answers id: the body itself for
// application/json, or the matching event of a text/event-stream (the server may
// stream notifications ahead of the answer).
func answer(resp *http.Response, id int64) ([]byte, error) {
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		return io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	case "text/event-stream":
		// Notifications may come first: the answer is the event with our id and
		// no method.
		var found []byte
		err := sse.Read(resp.Body, maxAnswer, func(ev sse.Event) error {
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

func drainClose(resp *http.Response) {
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
}
