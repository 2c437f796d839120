package web

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/switchboardhq/switchboard/ingest"
)

// Enter in a field of the rules form saves the rules: the form's default
// button is Save, never Remove (the first submit button in the form is the
// one Enter presses).
func TestBrowserEnterSavesRules(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, Options{})
	h, _ := f.webhookWithEvents()
	if _, err := f.st.SetWebhookRules(t.Context(), h.ID, 0, []byte(`{"filter":{"actions":["opened"]}}`), "test"); err != nil {
		t.Fatal(err)
	}
	browserLogin(t, ctx, f)
	step(t, ctx, "change the priority and press Enter",
		chromedp.Navigate(fmt.Sprintf("%s/webhook/%d", f.srv.URL, h.ID)),
		chromedp.Click(chromedp.CSS(`#webhook-rules > summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#webhook-rules input[name="priority"]`)),
		chromedp.SendKeys(chromedp.CSS(`#webhook-rules input[name="priority"]`), "5\r"),
		chromedp.WaitVisible(chromedp.CSS(`.flash.ok`)),
	)
	flash := run(t, ctx, "read the flash", chromedp.Evaluate[string](`document.querySelector(".flash.ok").textContent`))
	got, err := f.st.Webhook(t.Context(), h.ID)
	if err != nil {
		t.Fatal(err)
	}
	r, err := ingest.ParseRules(got.RulesJSON())
	if err != nil || r == nil || r.Priority != 5 || r.Filter == nil || len(r.Filter.Actions) != 1 || !strings.Contains(flash, "Rules saved") {
		t.Fatalf("Enter in the priority field: flash %q, rules %s (%v)", flash, got.RulesJSON(), err)
	}
}
