package bridge

import (
	"encoding/json"
	"net/http"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// From protocol version 2026-07-28 on, a POST mirrors parts of its body in
// headers (SEP-2243) so gateways can route and meter without parsing JSON:
// Mcp-Method, Mcp-Name (the tool, prompt or resource) and, for tools whose input
// schema marks a parameter with x-mcp-header, Mcp-Param-<name>. A stdio client
// knows nothing of HTTP, so the bridge adds them; mcp-go's helpers define the
// encoding.

// toolCache remembers the tool definitions the server listed, for their
// x-mcp-header annotations.
type toolCache struct {
	mu    sync.Mutex
	tools map[string]mcp.Tool
}

// learn records the tools in a tools/list answer.
func (c *toolCache) learn(answer []byte) {
	var a struct {
		Result struct {
			Tools []mcp.Tool `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal(answer, &a) != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tools == nil {
		c.tools = make(map[string]mcp.Tool)
	}
	for _, t := range a.Result.Tools {
		c.tools[t.Name] = t
	}
}

func (c *toolCache) lookup(params json.RawMessage) *mcp.Tool {
	var call struct {
		Name string `json:"name"`
	}
	if json.Unmarshal(params, &call) != nil || call.Name == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.tools[call.Name]
	if !ok {
		return nil
	}
	return &t
}

// setStandardHeaders adds the SEP-2243 headers for msg sent at version; it does
// nothing before 2026-07-28.
func (c *toolCache) setStandardHeaders(h http.Header, version string, msg message) {
	if msg.Method == "" {
		return
	}
	method := mcp.MCPMethod(msg.Method)
	for name, value := range mcp.StandardHeaders(version, method, msg.params) {
		h.Set(name, value)
	}
	if method == mcp.MethodToolsCall && mcp.RequiresStandardHeaders(version) {
		for name, value := range mcp.GenerateParamHeaders(c.lookup(msg.params), msg.params) {
			h.Set(name, value)
		}
	}
}
