package web

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// idsOf is todos' ids as rowIDs gives them.
func idsOf(todos ...store.Todo) []string {
	var ids []string
	for _, td := range todos {
		ids = append(ids, strconv.FormatInt(td.ID, 10))
	}
	return ids
}

// The board's todo table shows each todo's key (a link to its key's todos),
// priority and coalesced count, says a delayed todo is delayed and one behind
// its key waits; ?key= lists one key's todos, exactly, and keeps to it across
// the state tabs and the live rows.
func TestBoardShowsKeysAndFiltersByKey(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	ctx := context.Background()
	add := func(queue string, o store.TodoOptions) store.Todo {
		t.Helper()
		td, err := f.st.AddTodo(ctx, store.NewTodo{Queue: queue, Payload: "{}", CreatedBy: "test", Options: o})
		if err != nil {
			t.Fatal(err)
		}
		return td
	}
	const key = "octo/repo#42"
	head := add("prs", store.TodoOptions{Key: key, Priority: 5})
	if folded := add("prs", store.TodoOptions{Key: key, Coalesce: true}); folded.ID != head.ID {
		t.Fatalf("the second todo did not fold into the first: %d, %d", folded.ID, head.ID)
	}
	if _, err := f.st.Claim(ctx, store.Ack{ID: head.ID, Owner: "agent:worker"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	behind := add("prs", store.TodoOptions{Key: key})
	delayed := add("prs", store.TodoOptions{Key: "octo/repo#420", Delay: 10 * time.Minute})
	plain := add("prs", store.TodoOptions{})
	other := add("review", store.TodoOptions{Key: key})

	_, page := f.get("/", cookie)
	if got := rowIDs(page); !slices.Equal(got, idsOf(other, plain, delayed, behind, head)) {
		t.Fatalf("the board lists %v", got)
	}
	keyLink := `href="/?key=` + url.QueryEscape(key) + `"`
	for _, s := range []string{"<th>Queue and key</th>", keyLink, "+1 folded", `>priority 5</span>`,
		"delayed, claimable in 10m", "behind its key"} {
		if !strings.Contains(page, s) {
			t.Errorf("the board does not show %s", s)
		}
	}

	_, page = f.get("/?key="+url.QueryEscape(key), cookie)
	if got := rowIDs(page); !slices.Equal(got, idsOf(other, behind, head)) {
		t.Fatalf("the board of key %s lists %v", key, got)
	}
	if !strings.Contains(page, `id="by-key"`) || !strings.Contains(page, `key=`+url.QueryEscape(key)+`&amp;state=pending`) ||
		!strings.Contains(page, `name="key" value="`+key+`"`) {
		t.Fatal("the board of one key does not say so, or its tabs drop the key")
	}
	// Its tabs count what they list: that key's todos, not the queue's.
	if !strings.Contains(page, `>All <span class="count">3</span>`) {
		t.Error("the All tab of one key does not count its 3 todos")
	}
	_, counts := f.get("/?fragment=counts&queue=prs&key="+url.QueryEscape(key), cookie)
	for _, s := range []string{`>All <span class="count">2</span>`, `>pending <span class="count">1</span>`,
		`>claimed <span class="count">1</span>`, `>failed <span class="count">0</span>`} {
		if !strings.Contains(counts, s) {
			t.Errorf("the live tabs of key %s on prs do not say %s", key, s)
		}
	}
	// "Retry all" retries every dead letter of the queue: not offered on a list
	// of one key's, where it would seem to retry those alone.
	f.failed("prs")
	if _, page := f.get("/?state=failed", cookie); !strings.Contains(page, `action="/dead-letters/retry" class="retry-all"`) {
		t.Fatal("the Failed tab offers no Retry all")
	}
	if _, page := f.get("/?state=failed&key="+url.QueryEscape(key), cookie); strings.Contains(page, `action="/dead-letters/retry" class="retry-all"`) {
		t.Error("the Failed tab of one key offers to retry every dead letter")
	}
	_, rows := f.get("/?fragment=rows&queue=prs&state=pending&key="+url.QueryEscape(key), cookie)
	if got := rowIDs(rows); !slices.Equal(got, idsOf(behind)) {
		t.Fatalf("the live rows of key %s, pending on prs: %v", key, got)
	}
	_, page = f.get("/?key="+strings.Repeat("k", store.MaxKeyBytes+1), cookie)
	if !strings.Contains(page, "No todo has that key") || len(rowIDs(page)) != 6 {
		t.Fatal("a key too long to be one is not said, or the board does not list every todo")
	}

	_, page = f.get(fmt.Sprintf("/todos/%d", head.ID), cookie)
	for _, s := range []string{"<dt>Key</dt>", keyLink, "1 later todos folded into it", "<dt>Priority</dt><dd>5</dd>"} {
		if !strings.Contains(page, s) {
			t.Errorf("the todo page does not show %s", s)
		}
	}
	if _, page = f.get(fmt.Sprintf("/todos/%d", delayed.ID), cookie); !strings.Contains(page, "(delayed)") {
		t.Error("the todo page of a delayed todo does not say it is delayed")
	}
}
