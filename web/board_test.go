package web

import (
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

var rowRE = regexp.MustCompile(`data-todo-id="(\d+)"`)

func rowIDs(body string) []string {
	var ids []string
	for _, m := range rowRE.FindAllStringSubmatch(body, -1) {
		ids = append(ids, m[1])
	}
	return ids
}

func TestBoard(t *testing.T) {
	f := newFixture(t, Options{PageSize: 3})
	cookie, _ := f.login()
	var inbox []int64
	for i := range 4 {
		inbox = append(inbox, f.addTodo("inbox", fmt.Sprintf(`{"i":%d}`, i)).ID)
	}
	claimed := f.claimed("github")
	failed := f.failed("github")

	res, body := f.get("/", cookie)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	// Each queue's card shows its counts by state.
	for _, q := range []string{"inbox", "github"} {
		if !strings.Contains(body, `data-queue="`+q+`"`) {
			t.Errorf("no card for queue %s", q)
		}
	}

	cases := []struct {
		name, path string
		want       []int64
		older      bool
	}{
		{"newest first, one page", "/", []int64{failed.ID, claimed.ID, inbox[3]}, true},
		{"second page", fmt.Sprintf("/?before=%d", inbox[3]), []int64{inbox[2], inbox[1], inbox[0]}, false},
		{"by queue", "/?queue=github", []int64{failed.ID, claimed.ID}, false},
		{"by state", "/?state=claimed", []int64{claimed.ID}, false},
		{"by queue and state", "/?queue=inbox&state=failed", nil, false},
		{"unknown state is ignored", "/?state=bogus", []int64{failed.ID, claimed.ID, inbox[3]}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, body := f.get(tc.path, cookie)
			if res.StatusCode != http.StatusOK {
				t.Fatalf("status %d", res.StatusCode)
			}
			got := rowIDs(body)
			var want []string
			for _, id := range tc.want {
				want = append(want, fmt.Sprint(id))
			}
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("rows %v, want %v", got, want)
			}
			if has := strings.Contains(body, `rel="next"`); has != tc.older {
				t.Fatalf("older-page link present=%v, want %v", has, tc.older)
			}
		})
	}
}

func TestBoardCounts(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	f.addTodo("inbox", "{}")
	f.addTodo("inbox", "{}")
	f.claimed("inbox")
	f.failed("inbox")
	_, body := f.get("/?queue=inbox", cookie)
	// The queue card's bar is labelled with its counts; the tabs carry them too.
	if !strings.Contains(body, `aria-label="2 pending, 1 claimed, 1 failed, 0 done"`) {
		t.Fatalf("inbox counts missing:\n%s", body)
	}
	for state, n := range map[string]int{"pending": 2, "claimed": 1, "failed": 1, "done": 0} {
		want := fmt.Sprintf(`%s <span class="count">%d</span>`, state, n)
		if !strings.Contains(body, want) {
			t.Errorf("tab %q missing", want)
		}
	}
}

func TestBoardFragment(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	td := f.addTodo("inbox", "{}")
	res := f.do(http.MethodGet, "/?fragment=rows", cookie, nil, http.Header{"X-Requested-With": {"fetch"}})
	body := readBody(t, res)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	if strings.Contains(body, "<html") || strings.Contains(body, "<header") || strings.Contains(body, `class="queues"`) {
		t.Fatal("the rows fragment carries more than the rows")
	}
	if ids := rowIDs(body); len(ids) != 1 || ids[0] != fmt.Sprint(td.ID) {
		t.Fatalf("fragment rows %v", ids)
	}
	res = f.do(http.MethodGet, "/?fragment=counts", cookie, nil, http.Header{"X-Requested-With": {"fetch"}})
	body = readBody(t, res)
	if res.StatusCode != http.StatusOK || strings.Contains(body, "<html") || len(rowIDs(body)) != 0 ||
		!strings.Contains(body, `aria-label="1 pending, 0 claimed, 0 failed, 0 done"`) {
		t.Fatalf("counts fragment: %d\n%s", res.StatusCode, body)
	}
	// The headline under the title follows the totals.
	f.claimed("inbox")
	res = f.do(http.MethodGet, "/?fragment=headline", cookie, nil, http.Header{"X-Requested-With": {"fetch"}})
	if body = readBody(t, res); body != "1 waiting, 1 in progress, 0 dead-lettered." {
		t.Fatalf("headline fragment: %d %q", res.StatusCode, body)
	}
	// The page names its parts, with its filters, and what the rows part shows.
	_, body = f.get("/?queue=inbox&state=pending", cookie)
	for _, want := range []string{`<span id="headline" data-live-src="/?fragment=headline">1 waiting, 1 in progress, 0 dead-lettered.</span>`,
		`data-live-src="/?fragment=counts&amp;queue=inbox&amp;state=pending" data-live-counts`,
		`data-live-src="/?fragment=rows&amp;queue=inbox&amp;state=pending" data-live-rows data-live-queue="inbox" data-live-state="pending"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("the board lacks %s", want)
		}
	}
	res = f.do(http.MethodGet, "/glance", cookie, nil, http.Header{"X-Requested-With": {"fetch"}})
	body = readBody(t, res)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "inbox") || strings.Contains(body, "<html") {
		t.Fatalf("glance: %d\n%s", res.StatusCode, body)
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int64]string{0: "0", 7: "7", 999: "999", 1000: "1,000", 300229: "300,229",
		1234567: "1,234,567", -45000: "-45,000"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

// While writes fail (the database capped at its size stands in for a full disk),
// every page says so and what it means, the login page too; once writes succeed
// again the banner goes.
func TestPagesSayWhenWritesAreFailing(t *testing.T) {
	testkit.SQLiteOnly(t, "the page cap that stands in for a full disk is SQLite's")
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	if err := f.st.SetMaxPages(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.AddTodo(t.Context(), store.NewTodo{Queue: "inbox", Payload: strings.Repeat("x", 64<<10)}); err == nil {
		t.Fatal("a write past the cap succeeded")
	}
	const banner = "Nothing can be stored: writes failing since"
	if _, body := f.get("/", cookie); !strings.Contains(body, banner) || !strings.Contains(body, "disk is full") {
		t.Fatal("the board does not say that writes are failing")
	}
	if _, body := f.get("/login", nil); !strings.Contains(body, banner) {
		t.Fatal("the login page does not say that writes are failing")
	}
	if err := f.st.SetMaxPages(t.Context(), 1<<30); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(time.Second)
	f.addTodo("inbox", "fits")
	f.clock.Add(time.Minute)
	if _, body := f.get("/", cookie); strings.Contains(body, banner) {
		t.Fatal("the banner outlived the trouble")
	}
}

// A dead letter's row says why it failed, a long error cut to a line with the
// whole of it in the tooltip, so an operator need not open each one.
func TestFailedRowsSayWhy(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	f.failed("payments") // "boom"
	td := f.addTodo("payments", "x")
	td, err := f.st.Claim(t.Context(), store.Ack{ID: td.ID, Owner: "agent:worker"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	long := "card_declined: " + strings.Repeat("the issuer said no <again> ", 10)
	if _, err := f.st.Fail(t.Context(), store.Ack{ID: td.ID, Owner: "agent:worker", LeaseSeq: td.LeaseSeq}, long, false); err != nil {
		t.Fatal(err)
	}
	_, body := f.get("/?state=failed", cookie)
	if !strings.Contains(body, `<span class="err-line" title="boom">boom</span>`) {
		t.Error("a failed row does not show its error")
	}
	cut := clip(long, 90)
	if n := utf8.RuneCountInString(cut); n != 90 || !strings.HasSuffix(cut, "…") {
		t.Fatalf("clip gave %d characters: %q", n, cut)
	}
	if !strings.Contains(body, `title="card_declined: the issuer said no &lt;again&gt;`) ||
		!strings.Contains(body, html.EscapeString(cut)+`</span>`) {
		t.Error("a long error is not cut to a line with the whole of it in the tooltip")
	}
}

// A claimed row says when its agent was last heard of (the claim or its latest
// heartbeat): a long lease on an agent gone silent looked healthy.
func TestClaimedRowsSayWhenTheAgentWasHeard(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	td := f.addTodo("support", "x")
	if _, err := f.st.Claim(t.Context(), store.Ack{ID: td.ID, Owner: "agent:bot"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(25 * time.Minute)
	_, body := f.get("/?state=claimed", cookie)
	if !strings.Contains(body, "· heard 25m ago") || !strings.Contains(body, "ends in 35m") {
		t.Fatal("a claimed row does not say when its agent was last heard of")
	}
}

// A queue's card says how long its next todo has waited to be claimed, in red once
// that is long; a queue with nothing claimable says nothing.
func TestQueueCardsSayHowLongTheHeadHasWaited(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	f.addTodo("inbox", "{}")
	f.clock.Add(90 * time.Second)
	f.addTodo("fresh", "{}")
	f.claimed("busy")
	card := func(body, queue string) string {
		t.Helper()
		_, rest, ok := strings.Cut(body, `data-queue="`+queue+`"`)
		if !ok {
			t.Fatalf("no card for queue %s", queue)
		}
		c, _, _ := strings.Cut(rest, "</a>")
		return c
	}
	_, body := f.get("/", cookie)
	if c := card(body, "inbox"); !strings.Contains(c, `<p class="qhead" `) || !strings.Contains(c, "next up waiting 1m</p>") {
		t.Fatalf("inbox's card after 90 s:\n%s", c)
	}
	if c := card(body, "fresh"); !strings.Contains(c, "next up waiting under 1s</p>") {
		t.Fatalf("fresh's card:\n%s", c)
	}
	if c := card(body, "busy"); strings.Contains(c, "qhead") {
		t.Fatalf("a queue with nothing claimable shows a wait:\n%s", c)
	}
	f.clock.Add(10 * time.Minute)
	_, body = f.get("/?fragment=counts", cookie)
	if c := card(body, "inbox"); !strings.Contains(c, `<p class="qhead" `) || !strings.Contains(c, "next up waiting 11m</p>") {
		t.Fatalf("inbox's card after 11 minutes:\n%s", c)
	}
	f.clock.Add(5 * time.Minute)
	_, body = f.get("/?fragment=counts", cookie)
	if c := card(body, "inbox"); !strings.Contains(c, `<p class="qhead late" `) || !strings.Contains(c, "next up waiting 16m</p>") {
		t.Fatalf("inbox's card after 16 minutes:\n%s", c)
	}
}
