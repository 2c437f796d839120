package web

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/store"
)

// sampler starts the chart sampler on the fixture's store, with refused as the
// receiver's count of refused deliveries.
func (f *fixture) sampler(refused map[int64]int64) *store.ChartSampler {
	f.t.Helper()
	c, err := f.st.NewChartSampler(f.t.Context(), store.ChartOptions{Refused: func(id int64) int64 { return refused[id] }})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

// sample moves the clock to the next minute's start and samples the one that ended.
func (f *fixture) sample(c *store.ChartSampler) {
	f.t.Helper()
	now := f.clock.Now()
	f.clock.Add(now.Truncate(time.Minute).Add(time.Minute).Sub(now))
	if err := c.Sample(f.t.Context()); err != nil {
		f.t.Fatal(err)
	}
}

// chart returns the first figure whose title starts with title from a page.
func chart(t *testing.T, page, title string) string {
	t.Helper()
	start := strings.Index(page, `<span class="chart-title">`+title)
	if start < 0 {
		t.Fatalf("no chart %q on the page:\n%s", title, page)
	}
	end := strings.Index(page[start:], "</figure>")
	return page[start : start+end]
}

func checkDrawable(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"NaN", "Inf", "<no value>"} {
		if strings.Contains(page, bad) {
			t.Fatalf("the page has %q:\n%s", bad, page)
		}
	}
}

var pathRE = regexp.MustCompile(`<path class="line ([a-z-]+)" d="([^"]+)"`)

// points reads a line's points, by its class, as y values at their x.
func points(t *testing.T, fig, class string) map[string]string {
	t.Helper()
	for _, m := range pathRE.FindAllStringSubmatch(fig, -1) {
		if m[1] != class {
			continue
		}
		out := map[string]string{}
		for _, p := range strings.Split(strings.TrimPrefix(m[2], "M"), " L") {
			x, y, _ := strings.Cut(p, " ")
			out[x] = y
		}
		return out
	}
	t.Fatalf("no %s line in\n%s", class, fig)
	return nil
}

// The board's charts show a queue's last hour: the keys sum it, the scale ends at
// a round number above the peak, each minute sits at its place, and each column's
// tooltip says its values.
func TestBoardChartsShowTheQueuesHistory(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	c := f.sampler(nil)
	f.clock.Add(5 * time.Second) // 12:00:05
	var inbox []store.Todo
	for range 30 {
		inbox = append(inbox, f.addTodo("inbox", "{}"))
	}
	f.addTodo("ops", "{}")
	f.sample(c) // 12:00: 30 added on inbox
	for i, td := range inbox[:11] {
		a := store.Ack{ID: td.ID, Owner: "agent:worker"}
		claimed, cerr := f.st.Claim(t.Context(), a, time.Minute)
		if cerr != nil {
			t.Fatal(cerr)
		}
		a.LeaseSeq = claimed.LeaseSeq
		var err error
		if i < 10 {
			_, err = f.st.Complete(t.Context(), a, "ok")
		} else {
			_, err = f.st.Fail(t.Context(), a, "boom", false)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	f.sample(c) // 12:01: 10 completed, 1 failed
	f.clock.Add(30 * time.Second)

	_, page := f.get("/?queue=inbox", cookie)
	checkDrawable(t, page)
	flow := chart(t, page, "Todos per minute")
	for _, want := range []string{`added <b>30</b>`, `completed <b>10</b>`, `failed <b>1</b>`, // a hour's sums
		`>0</text>`, `>20</text>`, `>40</text>`, // 30 at most: the scale ends at 40
		`<title>12:00 UTC: 30 added, 0 completed, 0 failed</title>`, `<title>12:01 UTC: 0 added, 10 completed, 1 failed</title>`,
		`aria-label="Todos per minute on inbox, last hour: 30 added, 10 completed, 1 failed."`} {
		if !strings.Contains(flow, want) {
			t.Errorf("the flow chart lacks %s:\n%s", want, flow)
		}
	}
	// Now is 12:02:30: the hour's 60 points run from 11:02 to 12:01, each 314/60
	// wide; 12:00 is the 59th, 12:01 the last.
	slot := float64(chartRight-chartLeft) / 60
	at := func(i int) string { return coord(chartLeft + (float64(i)+0.5)*slot) }
	added, done := points(t, flow, "s-added"), points(t, flow, "s-done")
	if len(added) != 60 || added[at(58)] != coord(chartBottom-30.0/40*120) || added[at(59)] != coord(chartBottom) || added[at(0)] != coord(chartBottom) {
		t.Errorf("added drawn at %v", added)
	}
	if done[at(59)] != coord(chartBottom-10.0/40*120) {
		t.Errorf("completed drawn at %v", done)
	}
	// Pending: 30 at 12:00's end, 19 at 12:01's; the head waited 55 s, then 1m 55s.
	pending := chart(t, page, "Pending")
	if !strings.Contains(pending, `peak <b>30</b>`) || !strings.Contains(pending, `<path class="area s-pending"`) {
		t.Errorf("the pending chart:\n%s", pending)
	}
	wait := chart(t, page, "Oldest pending waited")
	for _, want := range []string{`peak <b>1m 55s</b>`, `>2m</text>`, `>1m</text>`, `<title>12:00 UTC: 55s waited</title>`} {
		if !strings.Contains(wait, want) {
			t.Errorf("the wait chart lacks %s:\n%s", want, wait)
		}
	}
	if !strings.Contains(page, `<a href="/?queue=inbox&amp;range=24h">Last day</a>`) {
		t.Errorf("no link to the day's charts")
	}

	// The page script refetches the panel alone, every 30 s, as the minutes move.
	if !strings.Contains(page, `data-live-src="/?fragment=charts&amp;queue=inbox" data-live-timed>`) {
		t.Errorf("the charts are not refreshed on the timer")
	}
	f.addTodo("inbox", "{}")
	f.sample(c) // 12:02
	res, part := f.get("/?fragment=charts&queue=inbox", cookie)
	if res.StatusCode != 200 || strings.Contains(part, "<html") || strings.Contains(part, "data-live-timed") ||
		!strings.Contains(chart(t, part, "Todos per minute"), `added <b>31</b>`) {
		t.Errorf("the charts fragment (%d):\n%s", res.StatusCode, part)
	}

	// All queues: ops's todo counts in.
	_, page = f.get("/", cookie)
	if fig := chart(t, page, "Todos per minute"); !strings.Contains(fig, `added <b>32</b>`) || !strings.Contains(fig, "on every queue") {
		t.Errorf("the all-queues chart:\n%s", fig)
	}

	// The day: 96 points of 15 minutes; both minutes fall in one of them.
	_, page = f.get("/?queue=inbox&range=24h", cookie)
	checkDrawable(t, page)
	flow = chart(t, page, "Todos per 15 minutes")
	if n := len(points(t, flow, "s-added")); n != 96 {
		t.Errorf("%d points in the day's chart, want 96", n)
	}
	if !strings.Contains(flow, `added <b>31</b>`) || !strings.Contains(flow, ` UTC: 31 added, 10 completed, 1 failed</title>`) {
		t.Errorf("the day's chart does not sum its 15 minutes:\n%s", flow)
	}
	if !strings.Contains(page, `<a href="/?queue=inbox&amp;range=24h" aria-current="page">Last day</a>`) {
		t.Errorf("the day's range is not marked current")
	}
}

// With nothing recorded the charts say so, on a scale that is not made up.
func TestBoardChartsEmpty(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	for _, path := range []string{"/", "/?range=24h", "/?queue=none-such"} {
		_, page := f.get(path, cookie)
		checkDrawable(t, page)
		fig := chart(t, page, "Todos per ")
		if !strings.Contains(fig, "Nothing recorded in the last ") || strings.Contains(fig, `<path`) || strings.Contains(fig, `<rect`) {
			t.Errorf("%s: the empty chart:\n%s", path, fig)
		}
		if !strings.Contains(fig, `>0</text>`) || !strings.Contains(fig, `added <b>0</b>`) {
			t.Errorf("%s: the empty chart has no zero:\n%s", path, fig)
		}
	}
}

// A webhook's page charts its deliveries and refusals.
func TestWebhookChart(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	h, err := f.st.CreateWebhook(t.Context(), store.NewWebhook{SourceType: "generic", Queue: "inbox", Secret: "s3cret-s3cret-s3cret", CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[int64]int64{}
	c := f.sampler(refused)
	for i := range 3 {
		if _, err := f.st.RecordDelivery(t.Context(), store.NewDelivery{WebhookID: h.ID, DeliveryID: fmt.Sprint(i), TrustMode: "signed", Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	refused[h.ID] = 7
	f.sample(c)
	_, page := f.get(fmt.Sprintf("/webhook/%d", h.ID), cookie)
	checkDrawable(t, page)
	fig := chart(t, page, "Deliveries per minute")
	for _, want := range []string{`stored <b>3</b>`, `refused <b>7</b>`, `>8</text>`, `<title>12:00 UTC: 3 stored, 7 refused</title>`} {
		if !strings.Contains(fig, want) {
			t.Errorf("the webhook chart lacks %s:\n%s", want, fig)
		}
	}
	if res, part := f.get(fmt.Sprintf("/webhook/%d?fragment=charts", h.ID), cookie); res.StatusCode != 200 ||
		strings.Contains(part, "<html") || !strings.Contains(part, `stored <b>3</b>`) {
		t.Errorf("the webhook's charts fragment (%d):\n%s", res.StatusCode, part)
	}
	_, page = f.get(fmt.Sprintf("/webhook/%d?range=24h", h.ID), cookie)
	if fig := chart(t, page, "Deliveries per 15 minutes"); !strings.Contains(fig, `stored <b>3</b>`) {
		t.Errorf("the day's webhook chart:\n%s", fig)
	}
}

func TestChartScales(t *testing.T) {
	for _, c := range []struct{ peak, want float64 }{{0, 1}, {1, 1}, {2, 2}, {3, 4}, {7, 8}, {9, 10}, {30, 40}, {61, 80}, {540000, 600000}} {
		if got := counts.ceil(c.peak); got != c.want {
			t.Errorf("counts.ceil(%v) = %v, want %v", c.peak, got, c.want)
		}
	}
	for _, c := range []struct {
		d    time.Duration
		want string
	}{{0, "0s"}, {45 * time.Second, "45s"}, {150 * time.Second, "2m 30s"}, {time.Hour + 5*time.Minute + 9*time.Second, "1h 5m"}, {26 * time.Hour, "1d 2h"}, {2 * time.Hour, "2h"}} {
		if got := spell(c.d); got != c.want {
			t.Errorf("spell(%v) = %q, want %q", c.d, got, c.want)
		}
	}
}

// A page is valid UTF-8 whatever bytes the database kept (SQLite keeps any):
// each other byte shows as U+FFFD, as PostgreSQL stores it.
func TestPagesAreUTF8(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	h, err := f.st.CreateWebhook(t.Context(), store.NewWebhook{SourceType: "generic", Queue: "inbox",
		Secret: "s3cret-s3cret-s3cret", CreatedBy: "test", Description: "desc \xff\xfe end"})
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/webhooks", fmt.Sprintf("/webhook/%d", h.ID)} {
		_, page := f.get(path, cookie)
		if !utf8.ValidString(page) || !strings.Contains(page, "desc \uFFFD\uFFFD end") {
			t.Errorf("%s is not UTF-8, or lacks the description with one U+FFFD a byte", path)
		}
	}
}
