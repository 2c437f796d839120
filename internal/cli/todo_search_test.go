package cli

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// todo list's search flags find todos by delivery key, source, event type, error
// text and holder, as the board's search box does; a search that matches nothing
// says so.
func TestTodoListSearches(t *testing.T) {
	db := filepath.Join(t.TempDir(), "sb.db")
	st := openRW(t, db)
	ctx := t.Context()
	h, err := st.CreateWebhook(ctx, store.NewWebhook{SourceType: "github", Queue: "gh", Secret: "s", CreatedBy: "human:cli"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := st.RecordDelivery(ctx, store.NewDelivery{WebhookID: h.ID, DeliveryID: "d-9", EventType: "push", TrustMode: "signed", Body: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	var byAna []int64
	for range 2 {
		td, err := st.AddTodo(ctx, store.NewTodo{Queue: "q", Payload: "x", CreatedBy: "human:ana"})
		if err != nil {
			t.Fatal(err)
		}
		byAna = append(byAna, td.ID)
	}
	held, ok, err := st.ClaimNext(ctx, "agent:bot", []string{"q"}, time.Hour)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	// It fails and backs off: the next claim takes the other.
	if _, err := st.Fail(ctx, store.Ack{ID: held.ID, Owner: "agent:bot", LeaseSeq: held.LeaseSeq}, "disk 100% full", true); err != nil {
		t.Fatal(err)
	}
	failed := held.ID
	if held, ok, err = st.ClaimNext(ctx, "agent:bot", []string{"q"}, time.Hour); err != nil || !ok {
		t.Fatal(ok, err)
	}
	st.Close()
	for _, c := range []struct {
		args []string
		want []int64
	}{
		{[]string{"--key", "d-9"}, []int64{d.TodoID}},
		{[]string{"--type", "push", "--source", "github"}, []int64{d.TodoID}},
		{[]string{"--source", "human:ana"}, []int64{byAna[1], byAna[0]}},
		{[]string{"--error", "100%"}, []int64{failed}},
		{[]string{"--error", "100_"}, nil},
		{[]string{"--holder", "bot", "--queue", "q"}, []int64{held.ID}},
	} {
		code, out, errs := cli(t, "", append([]string{"todo", "list", "--db", db, "--json"}, c.args...)...)
		var rows []store.Todo
		if err := json.Unmarshal([]byte(out), &rows); code != 0 || err != nil {
			t.Fatalf("%q: exit %d, %v %q", c.args, code, err, errs)
		}
		var ids []int64
		for _, r := range rows {
			ids = append(ids, r.ID)
		}
		if !slices.Equal(ids, c.want) {
			t.Errorf("%q: listed %v, want %v", c.args, ids, c.want)
		}
	}
	if code, out, _ := cli(t, "", "todo", "list", "--db", db, "--type", "issues", "--queue", "gh"); code != 0 || out != "no todos on gh that match\n" {
		t.Errorf("an empty search: exit %d, %q", code, out)
	}
}
