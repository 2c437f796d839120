package web

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Many board tabs: an event stream holds its connection for good, and a browser
// opens at most 6 connections to a host over HTTP/1.1, so a tab in the background
// lets its stream go, and takes it up again when it is shown.
func TestBrowserManyBackgroundTabs(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, Options{})
	f.addTodo("inbox", "{}")
	browserLogin(t, ctx, f)
	// Eight tabs opened in the background, one after the other, as ctrl-clicks
	// open them; each loads (its page, styles and script) before the next opens.
	var tabs []context.Context
	for i := range 8 {
		// Opened blank and attached to before it loads the board: attaching to a
		// tab in the middle of its first load can find no document to talk to
		// ("Cannot find default execution context"), as it did under the race
		// detector.
		bg, shared := true, false
		res, err := chromedp.CallBrowser(ctx, target.CreateTarget, target.CreateTargetParams{
			URL: "about:blank", Background: &bg, NewWindow: &shared})
		if err != nil {
			t.Fatalf("open tab %d: %v", i, err)
		}
		tctx, cancel := chromedp.NewContext(ctx, chromedp.WithTargetID(res.TargetID))
		t.Cleanup(cancel)
		// Attach on a context without a deadline: one would bound the tab's life.
		if err := chromedp.Do(tctx); err != nil {
			t.Fatalf("attach to tab %d: %v", i, err)
		}
		// Bounded, not timed: a tab that cannot get a connection never loads.
		lctx, lcancel := context.WithTimeout(tctx, 15*time.Second)
		if err := chromedp.Do(lctx, chromedp.Navigate(fmt.Sprintf("%s/?n=%d", f.srv.URL, i))); err != nil {
			lcancel()
			t.Fatalf("load the board in tab %d: %v", i, err)
		}
		state, err := chromedp.Run(lctx, chromedp.Evaluate[string](`new Promise(r => {
			const loaded = () => document.readyState === "complete" && document.querySelector(".queues")
				? r(document.visibilityState + " " + document.getElementById("live-status").textContent)
				: setTimeout(loaded, 50);
			loaded();
		})`, chromedp.EvalAwaitPromise))
		lcancel()
		if err != nil {
			t.Fatalf("background tab %d did not load: %v", i+1, err)
		}
		if state != "hidden paused" {
			t.Fatalf("background tab %d is %q, want hidden and paused", i+1, state)
		}
		tabs = append(tabs, tctx)
	}
	// Shown, a tab reopens its stream, catches up on what it missed, and is live.
	// (A hidden page gets no animation frames, so the waits below run once it is
	// shown.)
	missed := f.addTodo("inbox", `{"while":"hidden"}`)
	bctx, bcancel := context.WithTimeout(tabs[5], 10*time.Second)
	if _, err := chromedp.Call(bctx, page.BringToFront, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	bcancel()
	step(t, tabs[5], "the shown tab catches up",
		chromedp.WaitVisible(chromedp.CSS(`#live-status.on`)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-todo-id="%d"]`, missed.ID))))
	live := f.addTodo("inbox", `{"while":"shown"}`)
	step(t, tabs[5], "and is live", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-todo-id="%d"]`, live.ID))))
}

// On a phone the nav and the queue chips scroll sideways: each fades out on the
// side where more of it is hidden, and stops fading once scrolled to its end.
func TestBrowserScrollHints(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, Options{})
	for _, q := range []string{"github-issues", "stripe-payments", "slack-mentions", "inbox", "nightly-reports"} {
		f.addTodo(q, "{}")
	}
	browserLogin(t, ctx, f)
	step(t, ctx, "a phone's width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile),
		chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#live-status.on`)))
	hints := func(what string) string {
		t.Helper()
		return run(t, ctx, what, chromedp.Evaluate[string](`new Promise(r => requestAnimationFrame(() => r(
			[".nav", ".glance-list"].map(s => { const c = document.querySelector(s).classList;
				return (c.contains("more-left") ? "<" : "") + s + (c.contains("more-right") ? ">" : ""); }).join(" "))))`,
			chromedp.EvalAwaitPromise))
	}
	if got := hints("read the hints"); got != ".nav .glance-list>" && got != ".nav> .glance-list>" {
		t.Fatalf("at the start: %q, want the chips (and perhaps the nav) to fade on the right", got)
	}
	run(t, ctx, "scroll the chips to their end", chromedp.Evaluate[bool](`(() => {
		const l = document.querySelector(".glance-list"); l.scrollLeft = l.scrollWidth; return true })()`))
	if got := hints("read the hints again"); !strings.Contains(got, "<.glance-list") || strings.Contains(got, ".glance-list>") {
		t.Fatalf("scrolled to the end: %q, want the chips to fade on the left only", got)
	}
	step(t, ctx, "a desktop's width", chromedp.EmulateViewport(1280, 800))
	if got := hints("read the hints on a desktop"); got != ".nav .glance-list" {
		t.Fatalf("on a desktop: %q, want no fading", got)
	}
}
