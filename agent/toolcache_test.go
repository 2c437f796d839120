package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/store"
)

// changingSource offers one tool whose name the test changes; armed, its next
// SessionTools reads the name, then waits until released.
type changingSource struct {
	mu      sync.Mutex
	name    string
	hold    chan struct{}
	entered chan struct{}
}

func (s *changingSource) SessionTools(context.Context, store.Endpoint) []server.ServerTool {
	s.mu.Lock()
	name, hold := s.name, s.hold
	s.hold = nil
	s.mu.Unlock()
	if hold != nil {
		close(s.entered)
		<-hold
	}
	return []server.ServerTool{{Tool: mcp.NewTool(name, mcp.WithDescription("a module tool")),
		Handler: func(context.Context, mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return mcp.NewToolResultText("ok"), nil
		}}}
}

func (s *changingSource) set(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.name = name
}

// statelessToolNames lists cred's tools over the stateless revision.
func (e *env) statelessToolNames(cred string) map[string]bool {
	e.t.Helper()
	resp, body := e.raw(http.MethodPost, cred, "", modernBody(1, "tools/list", ""), modernHeaders("tools/list", ""))
	var rpc struct {
		Result struct {
			Tools []mcp.Tool `json:"tools"`
		} `json:"result"`
	}
	if err := json.Unmarshal([]byte(body), &rpc); err != nil || resp.StatusCode != http.StatusOK {
		e.t.Fatalf("tools/list: HTTP %d %s", resp.StatusCode, body)
	}
	names := map[string]bool{}
	for _, t := range rpc.Result.Tools {
		names[t.Name] = true
	}
	return names
}

// Tools built for a stateless request while a refresh drops them (a module's
// tools changed meanwhile) are not kept: the next request sees the new tools,
// not the ones read before the change.
func TestStatelessToolsNotKeptAcrossARefresh(t *testing.T) {
	src := &changingSource{name: "old_tool"}
	e := newEnv(t, func(c *envConfig) { c.agent.ToolSources = []ToolSource{src} })
	_, cred := e.endpoint("racer", []string{"inbox"}, nil)
	if got := e.statelessToolNames(cred); !got["old_tool"] {
		t.Fatalf("tools before the change: %v", got)
	}
	e.ag.RefreshSessions(context.Background(), 0) // what a module's change does first

	src.mu.Lock()
	src.hold, src.entered = make(chan struct{}), make(chan struct{})
	hold, entered := src.hold, src.entered
	src.mu.Unlock()
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.raw(http.MethodPost, cred, "", modernBody(1, "tools/list", ""), modernHeaders("tools/list", ""))
	}()
	<-entered // the request read the old tools and is building them
	src.set("new_tool")
	e.ag.RefreshSessions(context.Background(), 0)
	close(hold)
	<-done
	if got := e.statelessToolNames(cred); !got["new_tool"] || got["old_tool"] {
		t.Fatalf("tools after the change: %v, want new_tool and not old_tool", got)
	}
}
