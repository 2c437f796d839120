package web

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

var nextRE = regexp.MustCompile(`href="([^"]+)" rel="next"`)

// The board's search box finds todos by a delivery's key, source, event type,
// holder and error text, with the queue and state filters; it says what it
// searched for, keeps it in the box, the tabs and the paging, and a todo's number
// alone goes to that todo.
func TestBoardSearch(t *testing.T) {
	f := newFixture(t, Options{PageSize: 2})
	cookie, _ := f.login()
	h, ev := f.webhookWithEvents(`{"n":0}`, `{"n":1}`, `{"n":2}`)
	manual := f.addTodo("inbox", "{}")
	failed := f.failed("inbox") // its error: boom
	ids := func(ids ...int64) string {
		var s []string
		for _, id := range ids {
			s = append(s, fmt.Sprint(id))
		}
		return strings.Join(s, ",")
	}
	for _, c := range []struct{ path, want string }{
		{"/?q=key:d-1", ids(ev[1].TodoID)},
		{"/?q=" + url.QueryEscape(fmt.Sprintf("source:webhook:%d", h.ID)) + "&queue=github-issues", ids(ev[2].TodoID, ev[1].TodoID)},
		{"/?q=source:github&state=failed", ""},
		{"/?q=source:manual", ids(failed.ID, manual.ID)},
		{"/?q=boom", ids(failed.ID)},
		{"/?q=" + url.QueryEscape(`error:"BOO"`) + "&state=failed", ids(failed.ID)},
		{"/?q=holder:worker", ""},
		{"/?q=type:issues.opened&fragment=rows", ids(ev[2].TodoID, ev[1].TodoID)},
	} {
		res, body := f.get(c.path, cookie)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: status %d", c.path, res.StatusCode)
		}
		if got := strings.Join(rowIDs(body), ","); got != c.want {
			t.Errorf("%s: rows %s, want %s", c.path, got, c.want)
		}
	}

	// The search pages, and its next page keeps it.
	_, body := f.get("/?q=type:issues.opened&queue=github-issues", cookie)
	for _, want := range []string{`name="q" value="type:issues.opened"`, `<input type="hidden" name="queue" value="github-issues">`,
		`that match <span class="mono">type:issues.opened</span>`, `href="/?q=type%3Aissues.opened&amp;queue=github-issues&amp;state=failed"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the searched board lacks %s", want)
		}
	}
	m := nextRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no link to the older page of the search")
	}
	_, body = f.get(html.UnescapeString(m[1]), cookie)
	if got := strings.Join(rowIDs(body), ","); got != ids(ev[0].TodoID) {
		t.Errorf("the older page of the search: rows %s, want %s", got, ids(ev[0].TodoID))
	}

	// A number alone goes to the todo.
	for _, q := range []string{"7", "#7", " 7 "} {
		res := f.do(http.MethodGet, "/?q="+url.QueryEscape(q), cookie, nil, nil)
		res.Body.Close()
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/todos/7" {
			t.Errorf("%q: %d to %q, want 303 to /todos/7", q, res.StatusCode, res.Header.Get("Location"))
		}
	}
	// A search the board cannot read is said, and kept in the box to be mended.
	for q, want := range map[string]string{"type:": "type: needs a value", "type:a type:b": "type: is given twice",
		`error:"open`: "double quote in the search is not closed", strings.Repeat("x", 501): "longer than 500"} {
		res, body := f.get("/?q="+url.QueryEscape(q), cookie)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("%.20q: status %d, want a page saying %q", q, res.StatusCode, want)
		}
		if !strings.Contains(body, `value="`+html.EscapeString(q)+`"`) {
			t.Errorf("%.20q is not kept in the box", q)
		}
	}
}

// The search box's terms: fields, quoted values, words and colons in an error's
// text, and a holder named by its agent id alone.
func TestParseSearch(t *testing.T) {
	for q, want := range map[string]store.TodoSearch{
		`type:push Source:github key:abc`:     {Type: "push", Source: "github", Key: "abc"},
		`error:"connection refused" holder:x`: {Error: "connection refused", Holder: "x"},
		`dial tcp: i/o timeout`:               {Error: "dial tcp: i/o timeout"},
		`"type:push" source:human:1`:          {Error: "type:push", Source: "human:1"},
		`holder:agent:bot 100%`:               {Holder: "agent:bot", Error: "100%"},
		`12 34`:                               {Error: "12 34"},
	} {
		got, jump, err := parseSearch(q)
		if err != nil || jump != 0 || got != want {
			t.Errorf("%q: %+v %d %v, want %+v", q, got, jump, err, want)
		}
	}
}

// Each endpoint's "holds N todos" links to the board searched for exactly those
// todos: claimed by its agent, none of another's.
func TestHoldsLinksToTheHeldTodos(t *testing.T) {
	f := newFixture(t, Options{})
	if _, _, err := f.st.CreateEndpoint(t.Context(), "busy", endpointSpec([]string{"inbox"}), "test"); err != nil {
		t.Fatal(err)
	}
	var held []string
	for _, owner := range []string{"agent:busy", "agent:other", "agent:busy"} {
		td := f.addTodo("inbox", "work")
		if _, err := f.st.Claim(t.Context(), store.Ack{ID: td.ID, Owner: owner}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if owner == "agent:busy" {
			held = append([]string{fmt.Sprint(td.ID)}, held...)
		}
	}
	f.addTodo("inbox", "waiting")
	cookie, _ := f.login()
	_, body := f.get("/endpoints", cookie)
	m := regexp.MustCompile(`<a href="([^"]+)"[^>]*>holds 2 todos</a>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no link on holds 2 todos:\n%s", body)
	}
	_, body = f.get(html.UnescapeString(m[1]), cookie)
	if got := strings.Join(rowIDs(body), ","); got != strings.Join(held, ",") {
		t.Fatalf("%s lists %s, want %s", m[1], got, strings.Join(held, ","))
	}
}
