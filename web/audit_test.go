package web

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/store"
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

// The board names operators: "ana (human:1)" where the log says human:1, on the
// audit log and a todo's page, for an operator made after the board started
// too; the audit filter takes the name.
func TestBoardNamesOperators(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	td, err := f.st.AddTodo(t.Context(), store.NewTodo{Queue: "inbox", Payload: "x", CreatedBy: store.OperatorActor(f.human.ID)})
	if err != nil {
		t.Fatal(err)
	}
	if _, body := f.get(fmt.Sprintf("/todos/%d", td.ID), cookie); !strings.Contains(body, "created just now by <span class=\"mono\">ana (human:1)</span>") {
		t.Fatalf("the todo's page does not name its operator:\n%s", body)
	}
	bo, err := f.st.CreateOperator(t.Context(), "bo", testPassword, "test")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.st.Audit(t.Context(), store.AuditEntry{Actor: store.OperatorActor(bo.ID), Action: "human.login", Target: store.OperatorActor(bo.ID)}); err != nil {
		t.Fatal(err)
	}
	_, body := f.get("/audit?actor=bo", cookie)
	if !strings.Contains(body, ">bo (human:2)</a>") || strings.Contains(body, "ana (human:1)") || strings.Contains(body, "No audit rows") {
		t.Fatalf("the audit log filtered by bo:\n%s", body)
	}
	if _, body := f.get("/audit?actor=nobody", cookie); !strings.Contains(body, "No audit rows match") {
		t.Fatal("a name that is no operator matched rows")
	}
}
