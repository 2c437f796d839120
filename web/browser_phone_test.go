package web

import (
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"
)

// shownWhole takes [selector, text] pairs and lists what is wrong with the first
// element each selector names: absent, not starting with text, or not whole in
// the window (outside it, or cut by a box that scrolls or clips it: a nav
// scrolled sideways, a tab strip).
const shownWhole = `((selectors) => {
	const vw = document.documentElement.clientWidth, bad = [];
	for (const [sel, text] of selectors) {
		const el = document.querySelector(sel);
		if (!el) { bad.push(sel + ": none"); continue; }
		const r = el.getBoundingClientRect(), what = sel + " (" + el.textContent.trim().replace(/\s+/g, " ") + ")";
		if (text && !el.textContent.trim().toLowerCase().startsWith(text.toLowerCase())) bad.push(what + ": not " + text);
		if (r.width < 1 || r.height < 1 || getComputedStyle(el).visibility === "hidden") bad.push(what + ": not shown");
		if (r.left < -0.5 || r.right > vw + 0.5) bad.push(what + ": " + Math.round(r.left) + "-" + Math.round(r.right) + " outside 0-" + vw);
		for (let p = el.parentElement; p && p !== document.body; p = p.parentElement) {
			if (getComputedStyle(p).overflowX === "visible") continue;
			const b = p.getBoundingClientRect();
			if (r.left < b.left - 0.5 || r.right > b.right + 0.5) bad.push(what + ": cut by " + p.tagName + "." + p.className);
		}
	}
	return bad;
})`

// On a phone (390 px) the whole nav and every state tab are in the window, not
// cut at "Aud…" or hiding "Done", and the header's count chips have a legend.
func TestBrowserPhoneHeaderAndTabsFit(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, Options{Modules: &fakeModules{status: sampleModules()}})
	seedDemo(t, f)
	browserLogin(t, ctx, f)
	step(t, ctx, "a phone's width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch))
	for _, page := range []string{"/", "/?state=done", "/?queue=stripe-payments", "/audit"} {
		step(t, ctx, "open "+page, chromedp.Navigate(f.srv.URL+page), chromedp.WaitVisible(chromedp.CSS(`#live-status.on`)))
		check := [][2]string{{".nav a:first-child", "Board"}, {".nav a:last-child", "Audit"}, {".glance-legend", ""}}
		if page != "/audit" {
			check = append(check, [2]string{`.tabs[aria-label="Filter by state"] a:first-child`, "All"}, [2]string{`.tabs[aria-label="Filter by state"] a:last-child`, "Done"})
		}
		args, _ := json.Marshal(check)
		if bad := run(t, ctx, "measure "+page, chromedp.Evaluate[[]string](shownWhole+"("+string(args)+")")); len(bad) > 0 {
			t.Errorf("%s at 390 px: %q", page, bad)
		}
	}
	legend := run(t, ctx, "read the legend", chromedp.Evaluate[string](`document.querySelector(".glance-legend").textContent.replace(/\s+/g, " ").trim()`))
	if legend != "pending claimed failed" {
		t.Errorf("the chips' legend reads %q", legend)
	}
	label := run(t, ctx, "read a chip's label", chromedp.Evaluate[string](`document.querySelector(".glance-list a.chip").getAttribute("aria-label")`))
	if label != "github-issues: 2 pending, 1 claimed, 0 failed, 1 done" {
		t.Errorf("a chip's aria-label is %q", label)
	}
}
