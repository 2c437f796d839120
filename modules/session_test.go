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
	s, err := openSession(ctx, moduleOut, moduleIn, "test", func() {})
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
	if !slices.Equal(refusedNames, []string{"dup"}) {
		t.Errorf("refused names = %q, want dup", refusedNames)
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
	bad := `: not a JSON object with one "name" (a string): `
	want := []string{
		`(tool 2 of the listing)` + bad + `\"a string\"`,
		`(tool 3 of the listing)` + bad + `{\"description\":\"no name\"}`,
		`(tool 5 of the listing)` + bad + `{\"name\":5}`,
		// encoding/json would name these by the other spelling, or the last copy.
		`(tool 8 of the listing)` + bad + `{\"name\":\"x\",\"NAME\":\"other_deploy\"}`,
		`(tool 9 of the listing)` + bad + `{\"Name\":\"y\"}`,
		`(tool 10 of the listing)` + bad + `{\"name\":\"z\",\"name\":\"z2\"}`,
		`dup: advertised 2 times`,
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
