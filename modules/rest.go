package modules

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/switchboardhq/switchboard/internal/egress"
)

// maxErrorBody bounds the start of an error answer's body a tool error carries.
const maxErrorBody = 512

// restConn is a rest capability's connection: its operations, an HTTP client
// held to the egress policy, and its credential read from the environment.
type restConn struct {
	man    Manifest
	base   *url.URL
	ops    map[string]*restOp
	order  []*restOp
	client *http.Client
	auth   func(http.Header) // sets the credential; nil without auth
}

// newRestConn compiles the manifest's operations and reads its credential.
func newRestConn(man Manifest, guard egress.Guard, lookup func(string) (string, bool)) (*restConn, error) {
	ops, err := man.restOps()
	if err != nil {
		return nil, err
	}
	base, err := checkHTTPURL(man.BaseURL)
	if err != nil {
		return nil, fieldErr(man.File, "base_url", "%v", err)
	}
	var secret []string
	if man.Auth != nil && man.Auth.Type == "header" {
		secret = []string{man.Auth.Header}
	}
	c := &restConn{man: man, base: base, ops: map[string]*restOp{}, order: ops,
		client: egress.NewClient(&egress.Dialer{Guard: guard, Secret: secret}, 0)}
	for _, op := range ops {
		c.ops[op.Name] = op
	}
	c.auth = restAuth(man.Auth, lookup)
	return c, nil
}

// restAuth reads the credential once, at start: a changed variable needs a
// restart, as a module's does.
func restAuth(a *RestAuth, lookup func(string) (string, bool)) func(http.Header) {
	if a == nil {
		return nil
	}
	get := func(name string) string { v, _ := lookup(name); return v }
	switch a.Type {
	case "bearer":
		v := "Bearer " + get(a.Env)
		return func(h http.Header) { h.Set("Authorization", v) }
	case "header":
		name, v := a.Header, a.Prefix+get(a.Env)
		return func(h http.Header) { h.Set(name, v) }
	case "basic":
		v := "Basic " + base64.StdEncoding.EncodeToString([]byte(get(a.UsernameEnv)+":"+get(a.PasswordEnv)))
		return func(h http.Header) { h.Set("Authorization", v) }
	}
	return nil
}

func (c *restConn) listTools(context.Context) ([]upstreamTool, []RefusedTool, []string, int, error) {
	tools := make([]upstreamTool, 0, len(c.order))
	for _, op := range c.order {
		tools = append(tools, upstreamTool{Name: op.Name, Def: op.def})
	}
	return tools, nil, nil, 0, nil
}

func (c *restConn) brokenReason() error   { return nil }
func (c *restConn) done() <-chan struct{} { return nil } // it has no connection to lose
func (c *restConn) close()                { c.client.CloseIdleConnections() }

// callTool builds the request from the validated arguments, sends it and
// answers an MCP tools/call result. What went wrong with the request or the
// answer (a refused argument or destination, a timeout, an error status, an
// answer over the cap) is a tool error, isError: the capability stays up.
func (c *restConn) callTool(ctx context.Context, name string, raw json.RawMessage) (json.RawMessage, error) {
	op := c.ops[name]
	if op == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownTool, name)
	}
	req, err := c.request(ctx, op, raw)
	if err != nil {
		return toolError("%v", err), nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.man.timeout())
	defer cancel()
	resp, err := c.client.Do(req.WithContext(ctx))
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil:
			return toolError("%s %s: no answer within %s", op.Method, op.Path, c.man.timeout()), nil
		case egress.IsRefused(err):
			return toolError("%s %s: %v", op.Method, op.Path, errors.Unwrap(err)), nil
		}
		return toolError("%s %s: %v", op.Method, op.Path, err), nil
	}
	defer resp.Body.Close()
	return c.answer(ctx, op, resp), nil
}

// request builds op's request from args: path values escaped as one segment
// each, the rest as query, headers or a JSON body. The scheme and host are
// the base URL's, whatever the arguments hold.
func (c *restConn) request(ctx context.Context, op *restOp, raw json.RawMessage) (*http.Request, error) {
	args := map[string]any{}
	if !noArguments(raw) {
		v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("arguments: %v", err)
		}
		args, _ = v.(map[string]any)
	}
	if err := op.schema.Validate(args); err != nil {
		return nil, fmt.Errorf("arguments do not match the input schema: %v", err)
	}
	for _, k := range sortedKeys(args) {
		if _, ok := op.in[k]; !ok {
			return nil, fmt.Errorf("argument %q is not a parameter of %s", shown(k), op.Name)
		}
	}
	path, err := fillPath(op, args)
	if err != nil {
		return nil, err
	}
	u := *c.base
	u.RawPath = strings.TrimSuffix(c.base.EscapedPath(), "/") + path
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return nil, fmt.Errorf("path: %v", err)
	}
	query, body, header := url.Values{}, map[string]any{}, http.Header{}
	for _, k := range sortedKeys(args) {
		v := args[k]
		switch op.in[k] {
		case inQuery:
			vals, err := queryValues(k, v)
			if err != nil {
				return nil, err
			}
			query[k] = vals
		case inHeader:
			s, err := scalar(k, v)
			if err != nil {
				return nil, err
			}
			header.Set(k, s)
		case inBody:
			body[k] = v
		}
	}
	u.RawQuery = query.Encode()
	var rd io.Reader
	if hasBody(op) {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("body: %v", err)
		}
		rd = bytes.NewReader(b)
		header.Set("Content-Type", "application/json")
	}
	req, err := http.NewRequestWithContext(ctx, op.Method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if req.URL.Host != c.base.Host || req.URL.Scheme != c.base.Scheme {
		return nil, fmt.Errorf("the request would leave %s", c.base.Host) // not reached: the host is the base URL's
	}
	req.Header = header
	req.Header.Set("Accept", "application/json, text/*;q=0.9, */*;q=0.1")
	req.Header.Set("User-Agent", "switchboard")
	if c.auth != nil {
		c.auth(req.Header) // last: no argument sets the credential's header
	}
	return req, nil
}

func hasBody(op *restOp) bool {
	for _, in := range op.in {
		if in == inBody {
			return true
		}
	}
	return false
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// fillPath puts each path value in its place, escaped so that it stays one
// segment: "/" and "%" are escaped, and "." and ".." are refused (a client or
// server that cleans paths would climb with them).
func fillPath(op *restOp, args map[string]any) (string, error) {
	var err error
	out := placeholder.ReplaceAllStringFunc(op.Path, func(ph string) string {
		name := ph[1 : len(ph)-1]
		s, e := scalar(name, args[name])
		if e == nil && (s == "" || s == "." || s == "..") {
			e = fmt.Errorf("argument %q: %q cannot be a path segment", name, s)
		}
		if e != nil && err == nil {
			err = e
		}
		return url.PathEscape(s)
	})
	return out, err
}

// scalar is a path, query or header value as text: a string, number or boolean.
func scalar(name string, v any) (string, error) {
	switch v := v.(type) {
	case string:
		if strings.ContainsAny(v, "\r\n\x00") {
			return "", fmt.Errorf("argument %q holds a line break or NUL", name)
		}
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return strconv.FormatBool(v), nil
	case nil:
		return "", fmt.Errorf("argument %q is missing", name)
	}
	return "", fmt.Errorf("argument %q must be a string, number or boolean", name)
}

// queryValues is a query parameter's values: a scalar, or a list of them
// (repeated: ?tag=a&tag=b).
func queryValues(name string, v any) ([]string, error) {
	list, ok := v.([]any)
	if !ok {
		s, err := scalar(name, v)
		return []string{s}, err
	}
	out := make([]string, 0, len(list))
	for _, e := range list {
		s, err := scalar(name, e)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// answer reads at most the cap of the body and makes the tool result: an
// error status is a tool error with the status and the body's start; JSON
// under a declared outputSchema is structuredContent; other text is text.
func (c *restConn) answer(ctx context.Context, op *restOp, resp *http.Response) json.RawMessage {
	limit := c.man.maxResponse()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	status := resp.Status
	switch {
	case err != nil && ctx.Err() != nil:
		return toolError("%s %s: %s, and the body did not end within %s", op.Method, op.Path, status, c.man.timeout())
	case err != nil:
		return toolError("%s %s: %s, and reading the body failed: %v", op.Method, op.Path, status, err)
	case int64(len(body)) > limit:
		return toolError("%s %s: %s, and the body is over the %d-byte cap (max_response_bytes)", op.Method, op.Path, status, limit)
	case resp.StatusCode >= 400:
		return toolError("%s %s: HTTP %s: %s", op.Method, op.Path, status, shownText(bodyText(body, resp), maxErrorBody))
	}
	if op.output != nil {
		return structured(op, resp, body)
	}
	text := "HTTP " + status
	if len(body) > 0 {
		text += "\n\n" + bodyText(body, resp)
	}
	res, _ := json.Marshal(map[string]any{"content": []map[string]string{{"type": "text", "text": text}}})
	return res
}

// structured is the result of an operation that declares an outputSchema:
// MCP asks such a tool for structuredContent that matches it, so an answer that
// is not a JSON object, or does not match, is a tool error rather than a result
// a client would refuse.
func structured(op *restOp, resp *http.Response, body []byte) json.RawMessage {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if _, obj := v.(map[string]any); err != nil || !obj || !isJSON(resp) {
		return toolError("%s %s: %s, but the answer is not a JSON object (%s), which the operation's outputSchema asks for",
			op.Method, op.Path, resp.Status, shownText(resp.Header.Get("Content-Type"), 100))
	}
	if err := op.output.Validate(v); err != nil {
		return toolError("%s %s: %s, but the answer does not match the operation's outputSchema: %s",
			op.Method, op.Path, resp.Status, shownText(err.Error(), maxErrorBody))
	}
	res, _ := json.Marshal(map[string]any{
		"content":           []map[string]string{{"type": "text", "text": string(body)}},
		"structuredContent": json.RawMessage(body),
	})
	return res
}

func isJSON(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// bodyText is the body as text, or a note of its size when it is not UTF-8.
func bodyText(body []byte, resp *http.Response) string {
	if utf8.Valid(body) {
		return string(body)
	}
	return fmt.Sprintf("(%d bytes of %s, not text)", len(body), resp.Header.Get("Content-Type"))
}

// toolError is a tools/call result with isError and one line of text.
func toolError(format string, args ...any) json.RawMessage {
	res, _ := json.Marshal(map[string]any{
		"content": []map[string]string{{"type": "text", "text": fmt.Sprintf(format, args...)}},
		"isError": true,
	})
	return res
}
