package web

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/store"
)

// The endpoint form sets the queues add_todo may put todos on, at creation and
// on edit, as the CLI's --add-queues does; add_todo itself is granted by its
// box alone, which a new form leaves unticked.
func TestEndpointFormSetsAddQueues(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	_, page := f.get("/endpoints/new", cookie)
	if !strings.Contains(page, `name="add_queues"`) || strings.Contains(page, `value="add_todo" checked`) {
		t.Fatal("the new form has no add queues field, or ticks add_todo")
	}
	form := url.Values{csrfField: {csrf}, "agent_id": {"bot"}, "queues": {"inbox"}, "verbs": {"claim_next", "complete"},
		"add_queues": {"review, bad!queue"}}
	if res, body := f.post("/endpoints", cookie, form); res.StatusCode != http.StatusBadRequest ||
		!strings.Contains(body, "bad!queue&#34; is not a valid queue name") {
		t.Fatalf("a bad add queue: %d", res.StatusCode)
	}
	if eps, _ := f.st.ListEndpoints(t.Context(), false); len(eps) != 0 {
		t.Fatalf("a refused form made an endpoint: %+v", eps)
	}
	form.Set("add_queues", "review, triage")
	if res, _ := f.post("/endpoints", cookie, form); res.StatusCode != http.StatusOK {
		t.Fatalf("create with add queues: %d", res.StatusCode)
	}
	eps, _ := f.st.ListEndpoints(t.Context(), false)
	ep := eps[0]
	if !slices.Equal(ep.AddQueues, []string{"review", "triage"}) || slices.Contains(ep.Verbs, "add_todo") {
		t.Fatalf("created: add queues %q, verbs %q (add_todo unticked must stay ungranted)", ep.AddQueues, ep.Verbs)
	}
	path := fmt.Sprintf("/endpoints/%d", ep.ID)
	if _, page := f.get(path, cookie); !strings.Contains(page, `name="add_queues" value="review, triage"`) {
		t.Fatal("the edit form does not show the add queues")
	}
	// Ticked on edit, add_todo is granted; a form without the field (a page
	// from before it was there) keeps the queues; an empty field clears them.
	f.post(path, cookie, url.Values{csrfField: {csrf}, "queues": {"inbox"}, "verbs": {"claim_next", "add_todo"}})
	if got, _ := f.st.Endpoint(t.Context(), ep.ID); !slices.Contains(got.Verbs, "add_todo") || len(got.AddQueues) != 2 {
		t.Fatalf("edit without the field: verbs %q, add queues %q", got.Verbs, got.AddQueues)
	}
	// The list counts the default verbs and names add_todo apart, with its queues.
	f.post(path, cookie, url.Values{csrfField: {csrf}, "queues": {"inbox"}, "verbs": append(store.AllVerbs(), "add_todo")})
	if _, page := f.get("/endpoints", cookie); !strings.Contains(page, `all + <span class="mono">add_todo</span> to <span class="tag">review</span><span class="tag">triage</span>`) {
		t.Fatal("the endpoint list does not show add_todo and its queues")
	}
	res, body := f.post(path, cookie, url.Values{csrfField: {csrf}, "queues": {"inbox"}, "verbs": {"claim_next"}, "default_lease": {"x"}})
	if res.StatusCode != http.StatusBadRequest || !strings.Contains(body, `name="add_queues" value="review, triage"`) {
		t.Fatalf("a refused edit without the field did not show the stored queues: %d", res.StatusCode)
	}
	f.post(path, cookie, url.Values{csrfField: {csrf}, "queues": {"inbox"}, "verbs": {"claim_next"}, "add_queues": {""}})
	if got, _ := f.st.Endpoint(t.Context(), ep.ID); len(got.AddQueues) != 0 || slices.Contains(got.Verbs, "add_todo") {
		t.Fatalf("an empty field: verbs %q, add queues %q", got.Verbs, got.AddQueues)
	}
}
