package modules

import (
	"encoding/json"
	"strings"
	"testing"
)

// A module's definition nested deep to be expensive is laid out as it came, not
// indented into hundreds of megabytes; an ordinary one is indented.
func TestLaidOutIsBounded(t *testing.T) {
	deep := `{"name":"t","inputSchema":` + strings.Repeat(`{"a":`, 9_000) + "1" + strings.Repeat("}", 9_000) + "}"
	if got := LaidOut(json.RawMessage(deep)); got != deep {
		t.Errorf("a %d-byte definition nested 9,000 deep laid out as %d bytes", len(deep), len(got))
	}
	if got := LaidOut(json.RawMessage(`{"name":"t"}`)); got != "{\n  \"name\": \"t\"\n}" {
		t.Errorf("laid out as %q", got)
	}
}
