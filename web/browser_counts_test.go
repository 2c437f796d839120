package web

import (
	"testing"

	"github.com/chromedp/chromedp"
)

// A busy board: queue cards with six- and seven-digit counts stay legible on a
// desktop and on a phone, every number whole and apart from its neighbours.
func TestBrowserBusyQueueCards(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: seeds 1.5 million todos, which the race detector makes minutes")
	}
	ctx := browser(t)
	f := newFixture(t, Options{})
	for queue, n := range map[string]int{"github-issues": 1_234_567, "stripe-payments": 300_229} {
		if err := f.st.SeedTodosForBench(t.Context(), queue, n, ""); err != nil {
			t.Fatal(err)
		}
	}
	f.claimed("github-issues")
	f.failed("stripe-payments")
	browserLogin(t, ctx, f)
	// overlaps lists what does not fit in a card: a label or number cut short, or
	// two that overprint each other.
	const overlaps = `(() => {
		const bad = [];
		for (const card of document.querySelectorAll(".qcard")) {
			const parts = [...card.querySelectorAll(".qcounts dt, .qcounts dd, .qname, .qtotal")];
			const box = card.getBoundingClientRect();
			for (const p of parts) {
				const r = p.getBoundingClientRect();
				if (p.scrollWidth > p.clientWidth + 1 && !p.matches(".qname")) bad.push("cut: " + p.textContent);
				if (r.left < box.left || r.right > box.right) bad.push("outside its card: " + p.textContent);
			}
			for (let i = 0; i < parts.length; i++) for (let j = i + 1; j < parts.length; j++) {
				const a = parts[i].getBoundingClientRect(), b = parts[j].getBoundingClientRect();
				if (a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1)
					bad.push(parts[i].textContent + " over " + parts[j].textContent);
			}
		}
		return bad;
	})()`
	for _, size := range []struct {
		name          string
		width, height int64
		scale         float64
		mobile        bool
	}{{"board-busy-desktop", 1280, 800, 1, false}, {"board-busy-phone", 390, 844, 2, true}} {
		// The dead letters: the cards over a short table.
		step(t, ctx, "open the board", chromedp.Navigate(f.srv.URL+"/?state=failed"), chromedp.WaitVisible(chromedp.CSS(`#live-status.on`)))
		screenshot(t, ctx, size.name, size.width, size.height, size.scale, size.mobile)
		if bad := run(t, ctx, "check the cards", chromedp.Evaluate[[]string](overlaps)); len(bad) > 0 {
			t.Errorf("%s: %q", size.name, bad)
		}
		text := run(t, ctx, "read the card", chromedp.Text(chromedp.CSS(`[data-queue="github-issues"] dd.pending`)))
		if text != "1,234,567" {
			t.Errorf("%s: pending on github-issues reads %q", size.name, text)
		}
	}
}
