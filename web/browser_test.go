package web

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// Browser tests drive Debian's chromium through chromedp against a real board on a
// real SQLite file. They also write screenshots (see screenshotDir).

// screenshotDir is where the browser run leaves its screenshots: screenshots/ at the
// repository root (git ignores it, so a test run leaves the tree clean), or
// SWITCHBOARD_SCREENSHOT_DIR, e.g. docs/screenshots to refresh the committed set.
var screenshotDir = func() string {
	if d := os.Getenv("SWITCHBOARD_SCREENSHOT_DIR"); d != "" {
		if filepath.IsAbs(d) {
			return d
		}
		return filepath.Join("..", d)
	}
	return filepath.Join("..", "screenshots")
}()

// browser starts a fresh headless chromium, or skips when there is none.
func browser(t *testing.T) context.Context {
	t.Helper()
	if testing.Short() {
		// The race detector's run: the board's handlers run under it in the
		// HTTP tests; Chromium would add minutes to it.
		t.Skip("-short: Chromium drives the board in the full runs")
	}
	ctx := testkit.Chromium(t)
	// Accept every confirm dialog, as a human clicking OK would.
	go func() {
		for ev, err := range chromedp.Events(ctx, page.JavascriptDialogOpening) {
			if err != nil {
				return
			}
			_ = ev
			go chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
		}
	}()
	return ctx
}

// step runs actions with a generous bound, so a broken page fails the test instead
// of hanging it. Nothing is timed.
func step(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

func run[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// screenshot saves the current page at a width and height (CSS pixels) as
// <screenshotDir>/<name>.png, the whole page long.
func screenshot(t *testing.T, ctx context.Context, name string, width, height int64, scale float64, mobile bool) {
	t.Helper()
	opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(scale)}
	if mobile {
		opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch, chromedp.EmulatePortrait)
	}
	step(t, ctx, "resize for "+name, chromedp.EmulateViewport(width, height, opts...))
	// Let layout settle on the new width before capturing.
	run(t, ctx, "settle", chromedp.Evaluate[bool](`new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`, chromedp.EvalAwaitPromise))
	png := run(t, ctx, "screenshot "+name, chromedp.FullScreenshot(100))
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

func setDark(t *testing.T, ctx context.Context, dark bool) {
	t.Helper()
	value := "light"
	if dark {
		value = "dark"
	}
	if _, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: value}},
	}); err != nil {
		t.Fatal(err)
	}
}

func TestBrowserBoard(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, Options{Modules: &fakeModules{status: sampleModules()}, BaseURL: "https://switchboard.example.net"})
	demo := seedDemo(t, f)

	// Log in through the form.
	step(t, ctx, "open the board", chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitVisible(chromedp.ID("login-form")))
	screenshot(t, ctx, "login-desktop", 1280, 800, 1, false)
	step(t, ctx, "log in",
		chromedp.SendKeys(chromedp.CSS(`input[name="username"]`), "ana"),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), testPassword),
		chromedp.Submit(chromedp.ID("login-form")),
		chromedp.WaitVisible(chromedp.CSS(`.queues`)),
		// The live stream is up once the header says so.
		chromedp.WaitVisible(chromedp.CSS(`#live-status.on`)),
	)
	if title := run(t, ctx, "title", chromedp.Title()); !strings.HasPrefix(title, "Board") {
		t.Fatalf("title after login %q", title)
	}

	// A todo added behind the page's back appears without a reload.
	run(t, ctx, "mark the page", chromedp.Evaluate[bool](`window.__noReload = true`))
	added, err := f.st.AddTodo(t.Context(), store.NewTodo{Queue: "inbox", Payload: `{"task":"appears live"}`, CreatedBy: "test"})
	if err != nil {
		t.Fatal(err)
	}
	row := fmt.Sprintf(`tr[data-todo-id="%d"]`, added.ID)
	step(t, ctx, "watch the todo arrive", chromedp.WaitVisible(chromedp.CSS(row)))
	if still := run(t, ctx, "check no reload", chromedp.Evaluate[bool](`window.__noReload === true`)); !still {
		t.Fatal("the page reloaded to show the new todo")
	}

	// An agent claims it; the row turns claimed live; the human releases it.
	if _, err := f.st.Claim(t.Context(), store.Ack{ID: added.ID, Owner: "agent:triage"}, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	release := fmt.Sprintf(`%s form[action="/todos/%d/release"] button`, row, added.ID)
	step(t, ctx, "release from the board",
		chromedp.WaitVisible(chromedp.CSS(release)),
		chromedp.Click(chromedp.CSS(release)),
		chromedp.WaitVisible(chromedp.CSS(`.flash.ok`)),
	)
	if got := f.todo(added.ID); got.State != store.StatePending || got.Owner != "" {
		t.Fatalf("after release in the browser: %s owned by %q", got.State, got.Owner)
	}
	if rows := f.audited(fmt.Sprintf("todo:%d", added.ID)); rows[0].Action != "todo.release" || rows[0].Actor != store.OperatorActor(f.human.ID) {
		t.Fatalf("release audited as %+v", rows[0])
	}
	flash := run(t, ctx, "read flash", chromedp.Text(chromedp.CSS(`.flash.ok`)))
	if !strings.Contains(flash, "Released") {
		t.Fatalf("flash %q", flash)
	}

	// Screenshots: the board, a todo page.
	step(t, ctx, "open board", chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#live-status.on`)))
	screenshot(t, ctx, "board-desktop", 1280, 800, 1, false)
	setDark(t, ctx, true)
	screenshot(t, ctx, "board-desktop-dark", 1280, 800, 1, false)
	setDark(t, ctx, false)
	screenshot(t, ctx, "board-phone", 390, 844, 2, true)

	// The Failed tab after an outage: its dead letters grouped by error, each group
	// with its own retry.
	for range 3 {
		td := f.claimed("github-issues")
		if _, err := f.st.Fail(t.Context(), store.Ack{ID: td.ID, Owner: "agent:worker", LeaseSeq: td.LeaseSeq},
			"HTTP 502 from api.github.com: bad gateway", false); err != nil {
			t.Fatal(err)
		}
	}
	step(t, ctx, "open the Failed tab", chromedp.Navigate(f.srv.URL+"/?state=failed"),
		chromedp.WaitVisible(chromedp.CSS(`table.errors form[action="/dead-letters/retry"] button`)))
	screenshot(t, ctx, "board-failed-desktop", 1280, 800, 1, false)
	screenshot(t, ctx, "board-failed-phone", 390, 844, 2, true)
	step(t, ctx, "show one error's todos", chromedp.Click(chromedp.CSS(`table.errors a.err-line`)),
		chromedp.WaitVisible(chromedp.CSS(`.by-error form[action="/dead-letters/retry"] button`)))
	screenshot(t, ctx, "board-failed-one-error-desktop", 1280, 800, 1, false)

	step(t, ctx, "open todo", chromedp.Navigate(fmt.Sprintf("%s/todos/%d", f.srv.URL, demo.claimed)),
		chromedp.WaitVisible(chromedp.CSS(`.timeline`)))
	screenshot(t, ctx, "todo-phone", 390, 844, 2, true)
	screenshot(t, ctx, "todo-desktop", 1280, 800, 1, false)

	// Create an endpoint and read its one-time credential.
	step(t, ctx, "fill the endpoint form",
		chromedp.Navigate(f.srv.URL+"/endpoints/new"),
		chromedp.WaitVisible(chromedp.ID("endpoint-form")),
		chromedp.SendKeys(chromedp.CSS(`input[name="agent_id"]`), "triage"),
		chromedp.SendKeys(chromedp.CSS(`input[name="name"]`), "Issue triage"),
		chromedp.SendKeys(chromedp.CSS(`input[name="queues"]`), "github-issues, inbox"),
		chromedp.SendKeys(chromedp.CSS(`input[name="default_lease"]`), "600"),
		chromedp.Click(chromedp.CSS(`button[type="submit"].primary`)),
		chromedp.WaitVisible(chromedp.ID("credential")),
	)
	cred := strings.TrimSpace(run(t, ctx, "read credential", chromedp.Text(chromedp.ID("credential"))))
	ep, err := f.st.EndpointByCredential(t.Context(), cred)
	if err != nil {
		t.Fatalf("credential %q from the page does not authenticate: %v", cred, err)
	}
	if ep.AgentID != "triage" || ep.DefaultLeaseTTL != 600 || strings.Join(ep.Queues, ",") != "github-issues,inbox" {
		t.Fatalf("endpoint %+v", ep)
	}
	cfg := run(t, ctx, "read config", chromedp.Text(chromedp.ID("mcp-config")))
	if !strings.Contains(cfg, `"Bearer ${SWITCHBOARD_CREDENTIAL}"`) || !strings.Contains(cfg, `"type": "http"`) {
		t.Fatalf("MCP config on the page:\n%s", cfg)
	}
	if export := run(t, ctx, "read export", chromedp.Text(chromedp.ID("credential-export"))); strings.TrimSpace(export) != "export SWITCHBOARD_CREDENTIAL="+cred {
		t.Fatalf("export line on the page: %q", export)
	}
	screenshot(t, ctx, "endpoint-created-desktop", 1280, 800, 1, false)
	screenshot(t, ctx, "endpoint-created-phone", 390, 844, 2, true)

	// The other pages, for the record.
	step(t, ctx, "endpoint list", chromedp.Navigate(f.srv.URL+"/endpoints"), chromedp.WaitVisible(chromedp.CSS(`table.endpoints`)))
	screenshot(t, ctx, "endpoints-desktop", 1280, 800, 1, false)
	step(t, ctx, "endpoint form", chromedp.Navigate(fmt.Sprintf("%s/endpoints/%d", f.srv.URL, ep.ID)), chromedp.WaitVisible(chromedp.ID("endpoint-form")))
	screenshot(t, ctx, "endpoint-edit-desktop", 1280, 800, 1, false)
	step(t, ctx, "audit log", chromedp.Navigate(f.srv.URL+"/audit"), chromedp.WaitVisible(chromedp.CSS(`table.audit`)))
	screenshot(t, ctx, "audit-desktop", 1280, 800, 1, false)
	step(t, ctx, "modules", chromedp.Navigate(f.srv.URL+"/modules"), chromedp.WaitVisible(chromedp.CSS(`.module`)))
	screenshot(t, ctx, "modules-desktop", 1280, 800, 1, false)

	// Replay a webhook event from its page.
	step(t, ctx, "webhooks", chromedp.Navigate(f.srv.URL+"/webhooks"), chromedp.WaitVisible(chromedp.CSS(`table.webhooks`)))
	screenshot(t, ctx, "webhooks-desktop", 1280, 800, 1, false)

	// Create a webhook from the drawer and read its one-time secret.
	step(t, ctx, "open the New webhook form",
		chromedp.Click(chromedp.CSS(`#new-webhook > summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#new-webhook select[name="source"]`)),
		chromedp.SetValue(chromedp.CSS(`#new-webhook select[name="source"]`), "standard"),
		chromedp.SendKeys(chromedp.CSS(`#new-webhook input[name="queue"]`), "billing"),
		chromedp.SendKeys(chromedp.CSS(`#new-webhook input[name="description"]`), "invoices from the billing service"),
	)
	screenshot(t, ctx, "webhook-new-desktop", 1280, 800, 1, false)
	screenshot(t, ctx, "webhook-new-phone", 390, 844, 2, true)
	step(t, ctx, "back to the desktop width", chromedp.EmulateViewport(1280, 800))
	step(t, ctx, "create the webhook",
		chromedp.Click(chromedp.CSS(`#new-webhook button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.ID("signing-secret")),
	)
	secret := strings.TrimSpace(run(t, ctx, "read the secret", chromedp.Text(chromedp.ID("signing-secret"))))
	ingestURL := strings.TrimSpace(run(t, ctx, "read the ingest URL", chromedp.Text(chromedp.ID("ingest-url"))))
	token := ingestURL[strings.LastIndex(ingestURL, "/")+1:]
	hook, secrets, err := f.st.WebhookByToken(t.Context(), token)
	if err != nil || hook.SourceType != "standard" || hook.Queue != "billing" || len(secrets) != 1 || secrets[0] != secret || !strings.HasPrefix(secret, "whsec_") {
		t.Fatalf("webhook from the page %s: %+v, secret %q stored as %v (%v)", ingestURL, hook, secret, secrets, err)
	}
	screenshot(t, ctx, "webhook-created-desktop", 1280, 800, 1, false)
	step(t, ctx, "open the Rotate form",
		chromedp.Navigate(fmt.Sprintf("%s/webhook/%d", f.srv.URL, hook.ID)),
		chromedp.Click(chromedp.CSS(`#rotate-webhook > summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#rotate-webhook select[name="grace"]`)),
	)
	screenshot(t, ctx, "webhook-rotate-desktop", 1280, 800, 1, false)
	step(t, ctx, "fill in the Rules form",
		chromedp.Navigate(fmt.Sprintf("%s/webhook/%d", f.srv.URL, hook.ID)),
		chromedp.Click(chromedp.CSS(`#webhook-rules > summary`)),
		chromedp.WaitVisible(chromedp.CSS(`#webhook-rules input[name="key"]`)),
		chromedp.SendKeys(chromedp.CSS(`#webhook-rules input[name="events"]`), "invoice.paid, invoice.updated"),
		chromedp.SendKeys(chromedp.CSS(`#webhook-rules input[name="key"]`), "invoice:{/data/object/customer}"),
		chromedp.Click(chromedp.CSS(`#webhook-rules input[name="coalesce"]`)),
		chromedp.SendKeys(chromedp.CSS(`#webhook-rules input[name="debounce"]`), "30s"),
	)
	screenshot(t, ctx, "webhook-rules-desktop", 1280, 800, 1, false)
	step(t, ctx, "save the rules", chromedp.Click(chromedp.CSS(`#webhook-rules button.primary`)), chromedp.WaitVisible(chromedp.CSS(`.flash.ok`)))
	if h, err := f.st.Webhook(t.Context(), hook.ID); err != nil || h.Rules["key"] != "invoice:{/data/object/customer}" || h.Rules["coalesce"] != true {
		t.Fatalf("rules saved from the page: %v (%v)", h.Rules, err)
	}
	events, err := f.st.ListWebhookEvents(t.Context(), store.EventFilter{WebhookID: demo.webhook, Limit: 1})
	if err != nil || len(events) == 0 {
		t.Fatalf("demo events: %v", err)
	}
	ev := events[0]
	step(t, ctx, "open event", chromedp.Navigate(fmt.Sprintf("%s/events/%d", f.srv.URL, ev.ID)), chromedp.WaitVisible(chromedp.ID("event-body")))
	screenshot(t, ctx, "event-desktop", 1280, 800, 1, false)
	step(t, ctx, "replay", chromedp.Click(chromedp.ID("replay")), chromedp.WaitVisible(chromedp.CSS(`.flash.ok`)))
	loc := run(t, ctx, "location", chromedp.Location())
	var replayed int64
	if _, err := fmt.Sscanf(loc[len(f.srv.URL):], "/todos/%d", &replayed); err != nil {
		t.Fatalf("after replay the browser is at %s", loc)
	}
	got := f.todo(replayed)
	if got.Source.Type != "replay" || got.Source.EventID != ev.ID || got.Queue != "github-issues" || got.CreatedBy != store.OperatorActor(f.human.ID) {
		t.Fatalf("replayed todo %+v", got)
	}
}

type demoIDs struct{ claimed, webhook int64 }

// seedDemo fills the board with a realistic spread of work, minutes apart, so the
// screenshots show what an operator would see.
func seedDemo(t *testing.T, f *fixture) demoIDs {
	t.Helper()
	ctx := t.Context()
	hooks := map[string]store.Webhook{}
	for _, hk := range []struct{ src, queue, by string }{
		{"github", "github-issues", "agent:triage"}, {"stripe", "stripe-payments", "agent:billing"},
		{"slack", "slack-mentions", store.OperatorActor(f.human.ID)},
	} {
		h, err := f.st.CreateWebhook(ctx, store.NewWebhook{SourceType: hk.src, Queue: hk.queue,
			Secret: "demo-signing-secret-" + hk.src, CreatedBy: hk.by})
		if err != nil {
			t.Fatal(err)
		}
		hooks[hk.queue] = h
	}
	deliveries := 0
	// add puts a todo on a queue: through its webhook as a verified delivery, or by
	// hand for the inbox.
	add := func(queue, src, event, payload string, verified bool) store.Todo {
		f.clock.Add(47 * time.Second)
		if h, ok := hooks[queue]; ok && verified {
			deliveries++
			res, err := f.st.RecordDelivery(ctx, store.NewDelivery{WebhookID: h.ID, DeliveryID: fmt.Sprintf("%s-%04d", src, deliveries),
				EventType: event, TrustMode: "signed", Body: []byte(payload),
				Headers: map[string]string{"Content-Type": "application/json", "User-Agent": src + "-hookshot/1.0"}})
			if err != nil {
				t.Fatal(err)
			}
			return f.todo(res.TodoID)
		}
		n := store.NewTodo{Queue: queue, Payload: payload, CreatedBy: store.OperatorActor(f.human.ID), Source: store.Source{Type: src, EventType: event}}
		td, err := f.st.AddTodo(ctx, n)
		if err != nil {
			t.Fatal(err)
		}
		return td
	}
	claim := func(td store.Todo, owner string) store.Todo {
		c, err := f.st.Claim(ctx, store.Ack{ID: td.ID, Owner: owner}, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	complete := func(td store.Todo, owner, result string) {
		c := claim(td, owner)
		f.clock.Add(90 * time.Second)
		if _, err := f.st.Complete(ctx, store.Ack{ID: td.ID, Owner: owner, LeaseSeq: c.LeaseSeq}, result); err != nil {
			t.Fatal(err)
		}
	}
	issue := func(n int, title string) string {
		return fmt.Sprintf(`{"action":"opened","issue":{"number":%d,"title":%q,"user":{"login":"octocat"},"labels":["bug"]},"repository":{"full_name":"acme/api"}}`, n, title)
	}
	done1 := add("github-issues", "github", "issues.opened", issue(412, "Crash when the queue name has a slash"), true)
	complete(done1, "agent:triage", `{"labels":["bug","p2"],"comment":"Reproduced on 1.4.2"}`)
	inv := add("stripe-payments", "stripe", "invoice.paid", `{"id":"evt_1P","type":"invoice.paid","data":{"object":{"amount_paid":4900,"currency":"eur","customer":"cus_Q3"}}}`, true)
	complete(inv, "agent:billing", "receipt sent")
	add("slack-mentions", "slack", "app_mention", `{"event":{"type":"app_mention","text":"<@U1> can you summarise #incidents?","channel":"C024BE91L"}}`, true)
	failing := add("github-issues", "github", "issue_comment.created", issue(398, "Docs: systemd unit hardening"), true)
	// Dead-letter one: a todo with one attempt that the agent fails.
	failed, err := f.st.AddTodo(ctx, store.NewTodo{Queue: "stripe-payments", Payload: `{"id":"evt_9X","type":"charge.failed"}`,
		MaxAttempts: 1, CreatedBy: "webhook:2", Source: store.Source{Type: "stripe", EventType: "charge.failed"},
		Trust: store.Trust{Verified: true, Mode: "signed"}})
	if err != nil {
		t.Fatal(err)
	}
	failed = claim(failed, "agent:billing")
	if _, err := f.st.Fail(ctx, store.Ack{ID: failed.ID, Owner: "agent:billing", LeaseSeq: failed.LeaseSeq}, "card_declined: the customer's bank refused the charge; no retry will help", false); err != nil {
		t.Fatal(err)
	}
	_ = failing
	add("inbox", "manual", "", `{"task":"Rotate the GitHub webhook secret before Friday"}`, false)
	c1 := claim(add("github-issues", "github", "issues.opened", issue(415, "Board: dark mode contrast on badges"), true), "agent:triage")
	add("github-issues", "github", "issues.opened", issue(416, "Add Prometheus metric for lease expiries"), true)
	add("slack-mentions", "slack", "app_mention", `{"event":{"type":"app_mention","text":"<@U1> what failed overnight?"}}`, true)
	claim(add("stripe-payments", "stripe", "customer.subscription.updated", `{"id":"evt_2Q","type":"customer.subscription.updated"}`, true), "agent:billing")
	add("inbox", "manual", "", "Call the accountant about the Q2 VAT return", false)
	f.clock.Add(2 * time.Minute)
	return demoIDs{claimed: c1.ID, webhook: hooks["github-issues"].ID}
}

// 'Retry these' on an error of several lines retries its todos from a real
// browser, which sends a form field's line breaks as CRLF.
func TestBrowserRetryMultilineError(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, Options{})
	td := f.claimed("a")
	if _, err := f.st.Fail(t.Context(), store.Ack{ID: td.ID, Owner: "agent:worker", LeaseSeq: td.LeaseSeq}, "HTTP 502\nbad gateway", false); err != nil {
		t.Fatal(err)
	}
	browserLogin(t, ctx, f)
	step(t, ctx, "retry the error's todos", chromedp.Navigate(f.srv.URL+"/?state=failed"),
		chromedp.Click(chromedp.CSS(`table.errors form button`)), chromedp.WaitVisible(chromedp.CSS(`.flash.ok`)))
	if flash := run(t, ctx, "read the flash", chromedp.Evaluate[string](`document.querySelector(".flash.ok").textContent`)); !strings.Contains(flash, "Retried 1 todo ") {
		t.Fatalf("flash %q, todo %s", flash, f.todo(td.ID).State)
	}
}

// An operator changes their password from the Account page, reached from the
// header on a phone as on a desktop; the password manager's fields are named as
// such, and the new password logs in.
func TestBrowserChangePassword(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, Options{})
	seedDemo(t, f)
	if _, _, err := f.st.CreateWebSession(t.Context(), f.human.ID, time.Hour,
		"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1", ""); err != nil {
		t.Fatal(err)
	}
	browserLogin(t, ctx, f)
	step(t, ctx, "phone width", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2), chromedp.EmulateMobile, chromedp.EmulateTouch))
	step(t, ctx, "open the account page from the header", chromedp.Click(chromedp.CSS(`a.user`)), chromedp.WaitVisible(chromedp.ID("change-password")))
	screenshot(t, ctx, "account-phone", 390, 844, 2, true)
	screenshot(t, ctx, "account-desktop", 1280, 800, 1, false)
	if ac := run(t, ctx, "autocomplete", chromedp.Evaluate[string](`[...document.querySelectorAll("#change-password input:not([type=hidden])")].map(i => i.autocomplete).join(" ")`)); ac != "username current-password new-password new-password" {
		t.Fatalf("the form's autocomplete hints are %q", ac)
	}
	step(t, ctx, "change the password",
		chromedp.SendKeys(chromedp.CSS(`input[name="current"]`), testPassword),
		chromedp.SendKeys(chromedp.CSS(`input[name="new"]`), "a new password"),
		chromedp.SendKeys(chromedp.CSS(`input[name="confirm"]`), "a new password"),
		chromedp.Submit(chromedp.ID("change-password")),
		chromedp.WaitVisible(chromedp.CSS(`.flash.ok`)))
	if flash := run(t, ctx, "read the flash", chromedp.Evaluate[string](`document.querySelector(".flash.ok").textContent`)); !strings.Contains(flash, "Password changed") || !strings.Contains(flash, "(1 other session)") {
		t.Fatalf("flash %q", flash)
	}
	if rows := run(t, ctx, "count the sessions", chromedp.Evaluate[int](`document.querySelectorAll(".sessions tbody tr").length`)); rows != 1 {
		t.Fatalf("%d sessions listed after the change, want this one", rows)
	}
	if _, err := f.st.CheckPassword(t.Context(), "ana", "a new password"); err != nil {
		t.Fatalf("the new password: %v", err)
	}
}

// Every page fits the window, on a phone and on a desktop, with the names people
// give things (a long queue, a long agent): nothing pushes the page sideways.
func TestBrowserPagesFitTheWindow(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, Options{Modules: &fakeModules{status: sampleModules()}, BaseURL: "https://switchboard.example.net"})
	demo := seedDemo(t, f)
	long := "a-very-long-queue-name-for-the-nightly-customer-export-jobs"
	td := f.addTodo(long, `{"n":1}`)
	if _, err := f.st.Claim(t.Context(), store.Ack{ID: td.ID, Owner: "agent:the-nightly-export-builder-bot"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.AddTodo(t.Context(), store.NewTodo{Queue: long, Payload: "{}", CreatedBy: "test",
		Options: store.TodoOptions{Key: "acme/a-very-long-repository-name-for-the-nightly-exports#123456", Priority: 5}}); err != nil {
		t.Fatal(err)
	}
	q := []string{long, "inbox"}
	if _, _, err := f.st.CreateEndpoint(t.Context(), "the-nightly-export-builder-bot", store.EndpointSpec{Queues: &q}, "test"); err != nil {
		t.Fatal(err)
	}
	browserLogin(t, ctx, f)
	pages := []string{"/", "/?state=failed", "/?state=claimed", fmt.Sprintf("/todos/%d", td.ID), "/endpoints",
		"/webhooks", fmt.Sprintf("/webhook/%d", demo.webhook), "/audit", "/modules", "/account"}
	for _, size := range []struct {
		w, h   int64
		mobile bool
	}{{390, 844, true}, {1280, 800, false}} {
		opts := []chromedp.EmulateViewportOption{chromedp.EmulateScale(1)}
		if size.mobile {
			opts = append(opts, chromedp.EmulateMobile, chromedp.EmulateTouch)
		}
		step(t, ctx, "resize", chromedp.EmulateViewport(size.w, size.h, opts...))
		for _, page := range pages {
			step(t, ctx, "open "+page, chromedp.Navigate(f.srv.URL+page), chromedp.WaitVisible(chromedp.CSS(`main`)))
			wide := run(t, ctx, "measure "+page, chromedp.Evaluate[string](`(() => {
				const w = document.documentElement.clientWidth;
				if (document.documentElement.scrollWidth <= w + 1) return "";
				const out = [...document.querySelectorAll("main *")].filter(e => e.getBoundingClientRect().right > w + 1);
				const e = out[out.length - 1];
				return document.documentElement.scrollWidth + " > " + w + ": " + (e ? e.tagName + "." + e.className + " " + (e.textContent || "").trim().slice(0, 40) : "?");
			})()`))
			if wide != "" {
				t.Errorf("%s at %d px is wider than the window: %s", page, size.w, wide)
			}
		}
	}
}
