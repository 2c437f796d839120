package store

import (
	"context"
	"slices"
	"testing"
)

// TodoKey lists the todos of one key, exactly: not a todo of a longer key, nor
// one whose delivery id happens to be that text (which Key finds).
func TestListTodosOfOneKey(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{})
	add := func(queue, key string) int64 {
		t.Helper()
		td, err := s.AddTodo(ctx, NewTodo{Queue: queue, Payload: "{}", CreatedBy: "test", Options: TodoOptions{Key: key}})
		if err != nil {
			t.Fatal(err)
		}
		return td.ID
	}
	first, second := add("prs", "octo/repo#42"), add("prs", "octo/repo#42")
	other := add("review", "octo/repo#42")
	add("prs", "octo/repo#420")
	add("prs", "")
	h := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "prs", Secret: "x", CreatedBy: "human:1"})
	res, err := s.RecordDelivery(ctx, NewDelivery{WebhookID: h.ID, DeliveryID: "octo/repo#42", TrustMode: "signed", Body: []byte("{}")})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		f    TodoFilter
		want []int64
	}{
		{"every queue", TodoFilter{Search: TodoSearch{TodoKey: "octo/repo#42"}}, []int64{other, second, first}},
		{"one queue", TodoFilter{Queues: []string{"prs"}, Search: TodoSearch{TodoKey: "octo/repo#42"}}, []int64{second, first}},
		{"one queue, pending", TodoFilter{State: StatePending, Queues: []string{"prs"}, Search: TodoSearch{TodoKey: "octo/repo#42"}}, []int64{second, first}},
		{"a page", TodoFilter{Before: second, Search: TodoSearch{TodoKey: "octo/repo#42"}}, []int64{first}},
		{"no such key", TodoFilter{Search: TodoSearch{TodoKey: "octo/repo#4"}}, nil},
		{"a delivery id, by Key", TodoFilter{Queues: []string{"prs"}, Search: TodoSearch{Key: "octo/repo#42"}}, []int64{res.TodoID, second, first}},
	} {
		c.f.Limit = 50
		todos, err := s.ListTodos(ctx, c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []int64
		for _, td := range todos {
			got = append(got, td.ID)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
