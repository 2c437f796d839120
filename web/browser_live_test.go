package web

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboardhq/switchboard/store"
)

// Browser tests of the live updates under load: the board keeps changing while the
// human works it.

// browserLogin logs in through the form and waits for the live stream.
func browserLogin(t *testing.T, ctx context.Context, f *fixture) {
	t.Helper()
	step(t, ctx, "log in",
		chromedp.Navigate(f.srv.URL+"/login"),
		chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.CSS(`input[name="username"]`), "ana"),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), testPassword),
		chromedp.Submit(chromedp.ID("login-form")),
		chromedp.WaitVisible(chromedp.CSS(`#live-status.on`)),
	)
}

// churn adds a todo to queue every few milliseconds until the test ends or stop is
// called, as a busy webhook would.
func churn(t *testing.T, f *fixture, queue string) (stop func()) {
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			f.st.AddTodo(ctx, store.NewTodo{Queue: queue, Payload: `{"n":1}`, CreatedBy: "test"})
			time.Sleep(25 * time.Millisecond)
		}
	})
	stop = func() { cancel(); wg.Wait() }
	t.Cleanup(stop)
	return stop
}

// slowClick presses the mouse on the element sel, holds it as a human does (long
// enough for several live swaps), and lets go.
func slowClick(t *testing.T, ctx context.Context, sel string, hold time.Duration) {
	t.Helper()
	xy := pointAt(t, ctx, sel)
	step(t, ctx, "press on "+sel,
		chromedp.MouseEvent(chromedp.MousePressed, xy[0], xy[1], chromedp.ButtonLeft, chromedp.ClickCount(1)),
		chromedp.Sleep(hold),
		chromedp.MouseEvent(chromedp.MouseReleased, xy[0], xy[1], chromedp.ButtonLeft, chromedp.ClickCount(1)),
	)
}

// pointAt scrolls the element sel into view and returns its centre.
func pointAt(t *testing.T, ctx context.Context, sel string) []float64 {
	t.Helper()
	return run(t, ctx, "find "+sel, chromedp.Evaluate[[]float64](fmt.Sprintf(`(() => {
		const el = document.querySelector(%q);
		el.scrollIntoView({block: "center"});
		const r = el.getBoundingClientRect();
		return [r.left + r.width / 2, r.top + r.height / 2];
	})()`, sel)))
}

// waitState waits (bounded, not timed) for todo id to reach state.
func waitState(t *testing.T, f *fixture, id int64, state string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if got := f.todo(id); got.State == state {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("todo %d is %s, want %s", id, got.State, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A Retry pressed while the table is being redrawn under it still retries: the
// page holds its swaps while the mouse button is down.
func TestBrowserClickSurvivesLiveUpdates(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, Options{})
	dead := f.failed("stripe")
	browserLogin(t, ctx, f)
	step(t, ctx, "open the board", chromedp.Navigate(f.srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS(`#live-status.on`)))
	// Every new inbox todo is a new row of this (unfiltered) table.
	stop := churn(t, f, "inbox")
	retry := fmt.Sprintf(`form[action="/todos/%d/retry"] button`, dead.ID)
	step(t, ctx, "wait for the churn to show", chromedp.WaitVisible(chromedp.CSS(`tr.state-pending`)))
	// The button is found and pressed while nothing is added (on a loaded machine a
	// swap between the two moved the row from under the pointer), then the churn
	// goes on while the button is held: the swaps the test is about.
	stop()
	step(t, ctx, "let the last swaps land", chromedp.Sleep(500*time.Millisecond))
	xy := pointAt(t, ctx, retry)
	step(t, ctx, "press on "+retry,
		chromedp.MouseEvent(chromedp.MousePressed, xy[0], xy[1], chromedp.ButtonLeft, chromedp.ClickCount(1)))
	churn(t, f, "inbox")
	step(t, ctx, "hold it, and let go",
		chromedp.Sleep(1200*time.Millisecond),
		chromedp.MouseEvent(chromedp.MouseReleased, xy[0], xy[1], chromedp.ButtonLeft, chromedp.ClickCount(1)))
	waitState(t, f, dead.ID, store.StatePending)
}

// A filtered table is redrawn only for changes on its queue and state; the counts
// above it follow every change.
func TestBrowserLiveRowsOnlyForTheirFilter(t *testing.T) {
	ctx := browser(t)
	f := newFixture(t, Options{})
	dead := f.failed("stripe")
	f.addTodo("inbox", "{}")
	browserLogin(t, ctx, f)
	step(t, ctx, "open the failed stripe todos",
		chromedp.Navigate(f.srv.URL+"/?queue=stripe&state=failed"),
		chromedp.WaitVisible(chromedp.CSS(`#live-status.on`)))
	run(t, ctx, "mark the table", chromedp.Evaluate[bool](`document.querySelector("[data-live-rows] table").__kept = true`))
	stop := churn(t, f, "inbox")
	// The inbox card counts the new todos: the counts were redrawn, several times.
	run(t, ctx, "watch the inbox count grow", chromedp.Poll[bool](
		`Number(document.querySelector('[data-queue="inbox"] .qtotal').textContent.replace(/\D/g, "")) > 10`))
	// So was the headline under the title.
	run(t, ctx, "watch the headline follow", chromedp.Poll[bool](
		`Number(document.getElementById("headline").textContent.split(" waiting")[0].replace(/\D/g, "")) > 10`))
	stop()
	if kept := run(t, ctx, "is the table the same", chromedp.Evaluate[bool](
		`document.querySelector("[data-live-rows] table").__kept === true`)); !kept {
		t.Fatal("the failed-stripe table was redrawn for changes on inbox")
	}
	// A todo dead-lettered on stripe does appear.
	again := f.failed("stripe")
	step(t, ctx, "watch the new dead letter arrive", chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`tr[data-todo-id="%d"]`, again.ID))))
	// And the Retry pressed slowly works here too.
	slowClick(t, ctx, fmt.Sprintf(`form[action="/todos/%d/retry"] button`, dead.ID), 800*time.Millisecond)
	waitState(t, f, dead.ID, store.StatePending)
}
