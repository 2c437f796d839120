package web

import (
	"fmt"
	"html/template"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// Bytes anyone may plant (a payload, an agent's result, a delivery's body), made
// to be expensive to indent, cost an operator who opens their page no more than a
// page: deep nesting is shown as it came, a megabyte is cut and says so.
func TestHostileBytesRenderWithinABound(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	nest := func(depth int, inner string) string {
		return strings.Repeat("[", depth) + inner + strings.Repeat("]", depth)
	}
	// A 60 KB result: 20 KB of brackets around a string.
	result := nest(10_000, `"`+strings.Repeat("x", 40_000)+`"`)
	payload := nest(400_000, "")
	td := f.addTodo("inbox", payload)
	claimed, err := f.st.Claim(t.Context(), store.Ack{ID: td.ID, Owner: "agent:worker"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.Complete(t.Context(), store.Ack{ID: td.ID, Owner: "agent:worker", LeaseSeq: claimed.LeaseSeq}, result); err != nil {
		t.Fatal(err)
	}
	_, events := f.webhookWithEvents(nest(10_000, ""), strings.Repeat("<a>", 400_000))
	// A page is at most its texts shown whole (256 KiB each), escaped for HTML,
	// and the page around them.
	const bound = 2 << 20
	for _, page := range []struct {
		path  string
		shown []string // texts the page shows as they came
		cut   bool     // the page says a text is cut
	}{
		{fmt.Sprintf("/todos/%d", td.ID), []string{result, payload[:1000]}, true},
		{fmt.Sprintf("/todos/%d?fragment=1", td.ID), []string{result}, true},
		{fmt.Sprintf("/events/%d", events[0].EventID), []string{nest(10_000, "")}, false},
		{fmt.Sprintf("/events/%d", events[1].EventID), []string{strings.Repeat("<a>", 1000)}, true},
	} {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		res, body := f.get(page.path, cookie)
		runtime.ReadMemStats(&after)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", page.path, res.StatusCode)
		}
		if len(body) > bound {
			t.Errorf("%s: a page of %d bytes, want at most %d", page.path, len(body), bound)
		}
		// Work, counted as bytes allocated by the whole process while it served
		// the page rather than timed: before the bound, gigabytes.
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
			t.Errorf("%s: serving it allocated %d MiB", page.path, alloc>>20)
		}
		for _, s := range page.shown {
			if !strings.Contains(body, template.HTMLEscapeString(s)) {
				t.Errorf("%s does not show %.40q… as it came", page.path, s)
			}
		}
		if got := strings.Contains(body, "Only the start is shown"); got != page.cut {
			t.Errorf("%s: says it is cut: %v, want %v", page.path, got, page.cut)
		}
	}
}
