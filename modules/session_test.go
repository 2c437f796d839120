package modules

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// fakeStdioModule answers initialize and tools/list (with tools, raw) over a
// pair of pipes, as a module on stdio would, and returns a session on it.
func fakeStdioModule(t *testing.T, tools string) *session {
	t.Helper()
	toModule, moduleIn := io.Pipe()
	moduleOut, fromModule := io.Pipe()
	go func() {
		sc := bufio.NewScanner(toModule)
		for sc.Scan() {
			var req struct {
				ID     json.RawMessage `json:"id"`
				Method string          `json:"method"`
			}
			if json.Unmarshal(sc.Bytes(), &req) != nil || len(req.ID) == 0 {
				continue // a notification
			}
			var result string
			switch req.Method {
			case "initialize":
				result = fmt.Sprintf(`{"protocolVersion":%q,"capabilities":{"tools":{}},"serverInfo":{"name":"fake","version":"1"}}`,
					mcp.LATEST_LEGACY_PROTOCOL_VERSION)
			case "tools/list":
				result = `{"tools":` + strings.Join(strings.Fields(tools), " ") + `}` // one line a message
			default:
				result = `{}`
			}
			fmt.Fprintf(fromModule, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", req.ID, result)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := openSession(ctx, moduleOut, moduleIn, "test", func() {}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.close(); toModule.Close(); fromModule.Close() })
	return s
}

// A definition that is not an object with a name, or a name advertised twice, is
// refused on its own; the listing and the module's other tools survive it.
func TestListToolsRefusesMalformedDefinitionsAlone(t *testing.T) {
	s := fakeStdioModule(t, `[{"name":"ok","inputSchema":{"type":"object"}}, "a string", {"description":"no name"},
		{"name":"dup"}, {"name":5}, {"name":"dup","description":"again"}, {"name":"also_ok"},
		{"name":"x","NAME":"other_deploy"}, {"Name":"y"}, {"name":"z","name":"z2"}]`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tools, refused, refusedNames, nameless, err := s.listTools(ctx)
	if err != nil || nameless != 0 {
		t.Fatal(err, nameless)
	}
	if !slices.Equal(refusedNames, []string{"x", "y", "z2", "dup", "", "", ""}) {
		t.Errorf("refused names = %q", refusedNames)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.Name)
	}
	if !slices.Equal(names, []string{"ok", "also_ok"}) {
		t.Fatalf("tools = %q, want ok and also_ok", names)
	}
	var got []string
	for _, r := range refused {
		got = append(got, r.Upstream+": "+r.Reason)
	}
	bad := `: not a JSON object with exactly one "name" (a string; no other spelling of it): `
	// Refusals with a name first; encoding/json would name these by another
	// spelling, or by the last copy.
	want := []string{
		`x` + bad + `{\"name\":\"x\",\"NAME\":\"other_deploy\"}`,
		`y` + bad + `{\"Name\":\"y\"}`,
		`z2` + bad + `{\"name\":\"z\",\"name\":\"z2\"}`,
		`dup: advertised 2 times`,
		`(tool 2 of the listing)` + bad + `\"a string\"`,
		`(tool 3 of the listing)` + bad + `{\"description\":\"no name\"}`,
		`(tool 5 of the listing)` + bad + `{\"name\":5}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("refused:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// Past maxRefusedShown, definitions with no name are counted, not kept: a listing
// of tiny junk must not become a much larger list of previews in memory.
func TestListToolsCountsJunkPastTheCap(t *testing.T) {
	junk := strings.Repeat(`1, `, maxRefusedShown+5)
	s := fakeStdioModule(t, `[`+junk+`{"name":"ok"}]`)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tools, refused, _, nameless, err := s.listTools(ctx)
	if err != nil || len(tools) != 1 || len(refused) != maxRefusedShown || nameless != 5 {
		t.Fatalf("tools %d, refused %d, nameless %d, %v", len(tools), len(refused), nameless, err)
	}
	m := &module{}
	m.setRefused(listing{refused: refused, uncounted: nameless})
	if len(m.refused) != maxRefusedShown || m.refusedMore != 5 {
		t.Fatalf("status keeps %d and counts %d more, want %d and 5", len(m.refused), m.refusedMore, maxRefusedShown)
	}
}

// A module's JSON-RPC error message reaches the log, its status and agents escaped
// and bounded.
func TestRPCErrorTextIsEscapedAndBounded(t *testing.T) {
	e := &RPCError{Code: -32603, Message: "boom \u202e\x1b[2J" + strings.Repeat("a", 5000)}
	got := e.Error()
	if strings.ContainsAny(got, "\u202e\x1b") || !strings.Contains(got, `boom \u202e\u001b[2J`) || len(got) > maxShownError+100 {
		t.Fatalf("Error() = %.200q… (%d bytes)", got, len(got))
	}
}
