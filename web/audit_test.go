package web

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestAuditPage(t *testing.T) {
	f := newFixture(t, Options{PageSize: 2})
	cookie, _ := f.login()
	td := f.claimed("inbox") // audits todo.add by test, todo.claim by agent:worker
	cases := []struct {
		query string
		want  []string // actor/action pairs expected, in order
	}{
		{"?actor=agent:worker", []string{"agent:worker todo.claim"}},
		{"?action=todo.add", []string{"test todo.add"}},
		{"?action=todo.", []string{"agent:worker todo.claim", "test todo.add"}},
		{"?actor=nobody", nil},
	}
	for _, tc := range cases {
		t.Run(tc.query, func(t *testing.T) {
			res, body := f.get("/audit"+tc.query, cookie)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d", res.StatusCode)
			}
			rows := strings.Count(body, `<td data-label="When">`)
			if rows != len(tc.want) {
				t.Fatalf("%d rows, want %d", rows, len(tc.want))
			}
			for _, w := range tc.want {
				actor, action, _ := strings.Cut(w, " ")
				if !strings.Contains(body, ">"+actor+"</a>") || !strings.Contains(body, ">"+action+"</a>") {
					t.Fatalf("missing %s", w)
				}
			}
		})
	}
	// Targets link to their pages; pages of more than PageSize rows link onwards.
	_, body := f.get("/audit", cookie)
	if !strings.Contains(body, fmt.Sprintf(`href="/todos/%d"`, td.ID)) {
		t.Fatal("todo target not linked")
	}
	if !strings.Contains(body, `rel="next"`) {
		t.Fatal("no link to older rows")
	}
}
