package web

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboardhq/switchboard/store"
)

// seedHistory runs the chart sampler over a day and an hour of a queue's traffic
// (a daily swell, an outage of the agent an hour ago that it catches up on) and a
// webhook's deliveries with a few refusals, counted in refused as the receiver would. The day goes by in five-minute steps,
// the last hour in minutes.
func seedHistory(t *testing.T, f *fixture, refused fakeFailures) store.Webhook {
	t.Helper()
	ctx := t.Context()
	h, err := f.st.CreateWebhook(ctx, store.NewWebhook{SourceType: "github", Queue: "github-issues", Secret: "demo-signing-secret", CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	c := f.sampler(refused)
	rnd := rand.New(rand.NewPCG(26, 17)) // the same day every run
	deliveries := 0
	var waiting []store.Todo
	total := 25 * 60
	for m := 0; m < total; {
		step := 5
		if total-m <= 60 {
			step = 1
		}
		swell := 1 + math.Sin(float64(m)/float64(total)*2*math.Pi*1.5)
		for range step * (int(swell*1.5) + rnd.IntN(2)) {
			deliveries++
			res, err := f.st.RecordDelivery(ctx, store.NewDelivery{WebhookID: h.ID, DeliveryID: fmt.Sprint(deliveries), TrustMode: "signed", Body: []byte(`{"action":"opened"}`)})
			if err != nil {
				t.Fatal(err)
			}
			waiting = append(waiting, f.todo(res.TodoID))
		}
		if rnd.IntN(12) == 0 {
			refused[h.ID] += int64(1 + rnd.IntN(3))
		}
		// The agent is away from 50 to 35 minutes ago, then drains the backlog.
		away := total-m <= 50 && total-m > 35
		for done := 0; !away && len(waiting) > 0 && done < step*(3+rnd.IntN(2)); done++ {
			a := store.Ack{ID: waiting[0].ID, Owner: "agent:triage"}
			waiting = waiting[1:]
			claimed, cerr := f.st.Claim(ctx, a, 10*time.Minute)
			if cerr != nil {
				t.Fatal(cerr)
			}
			a.LeaseSeq = claimed.LeaseSeq
			var err error
			if rnd.IntN(40) == 0 {
				_, err = f.st.Fail(ctx, a, "HTTP 502 from api.github.com", false)
			} else {
				_, err = f.st.Complete(ctx, a, "labelled")
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		f.clock.Add(time.Duration(step-1) * time.Minute)
		f.sample(c)
		m += step
	}
	return h
}

// The board's charts drawn in Chromium: three charts of the queue's hour, a link
// to its day, the webhook's traffic; screenshots in light, dark and on a phone.
func TestBrowserBoardCharts(t *testing.T) {
	ctx := browser(t)
	refused := fakeFailures{}
	f := newFixture(t, Options{Failures: refused})
	h := seedHistory(t, f, refused)
	browserLogin(t, ctx, f)

	step(t, ctx, "open the queue's charts", chromedp.Navigate(f.srv.URL+"/?queue=github-issues"),
		chromedp.WaitVisible(chromedp.CSS(`.charts .chart-svg path.line.s-added`)))
	drawn := run(t, ctx, "measure the charts", chromedp.Evaluate[string](`(() => {
		const svgs = [...document.querySelectorAll(".charts .chart-svg")];
		const line = getComputedStyle(document.querySelector(".chart-svg path.line.s-added"));
		const area = getComputedStyle(document.querySelector(".chart-svg path.area"));
		return svgs.length + " charts, " + svgs.map(s => Math.round(s.getBoundingClientRect().width) > 200).join(",") +
			"; line " + line.stroke + " fill " + line.fill + "; area fill " + area.fill;
	})()`))
	if !strings.HasPrefix(drawn, "3 charts, true,true,true; line rgb(37, 99, 235) fill none; area fill rgb(37, 99, 235)") {
		t.Fatalf("the charts are drawn as %s", drawn)
	}
	screenshot(t, ctx, "board-charts-desktop", 1280, 800, 1, false)
	setDark(t, ctx, true)
	screenshot(t, ctx, "board-charts-desktop-dark", 1280, 800, 1, false)
	setDark(t, ctx, false)
	screenshot(t, ctx, "board-charts-phone", 390, 844, 2, true)
	step(t, ctx, "back to the desktop width", chromedp.EmulateViewport(1280, 800))

	step(t, ctx, "show the day", chromedp.Click(chromedp.CSS(`.charts .range a[href*="range=24h"]`)),
		chromedp.WaitVisible(chromedp.CSS(`.range a[aria-current="page"][href*="range=24h"]`)))
	if title := run(t, ctx, "read the title", chromedp.Text(chromedp.CSS(`.chart-title`))); title != "Todos per 15 minutes" {
		t.Fatalf("the day's chart is titled %q", title)
	}
	screenshot(t, ctx, "board-charts-day-desktop", 1280, 800, 1, false)

	step(t, ctx, "open the webhook", chromedp.Navigate(fmt.Sprintf("%s/webhook/%d", f.srv.URL, h.ID)),
		chromedp.WaitVisible(chromedp.CSS(`.charts .chart-svg path.line.s-failed`)))
	screenshot(t, ctx, "webhook-charts-desktop", 1280, 800, 1, false)
}
