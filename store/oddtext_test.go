package store

import (
	"context"
	"errors"
	"testing"
)

// Text PostgreSQL's text cannot hold (a NUL byte, bytes that are not UTF-8),
// given to a read, is no error on either backend: a board search or an audit
// filter finds nothing, and a login with such a username is an unknown
// username, as on SQLite, not a failure to check it (a 500 on PostgreSQL).
func TestReadsOfTextADatabaseCannotHoldAreNoErrors(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "x"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateOperator(ctx, "ana", "a long enough password", "system"); err != nil {
		t.Fatal(err)
	}
	for _, odd := range []string{"a\x00b", "\x00", "a\xffb"} {
		searches := map[string]TodoSearch{"key": {Key: odd}, "todo key": {TodoKey: odd}, "source": {Source: odd},
			"type": {Type: odd}, "error": {Error: odd}, "holder": {Holder: odd}}
		for name, search := range searches {
			if got, err := s.ListTodos(ctx, TodoFilter{Search: search}); err != nil || len(got) != 0 {
				t.Errorf("todos by %s %q: %d, %v; want none and no error", name, odd, len(got), err)
			}
		}
		if got, err := s.ListTodos(ctx, TodoFilter{Queues: []string{odd}}); err != nil || len(got) != 0 {
			t.Errorf("todos of the queue %q: %d, %v; want none and no error", odd, len(got), err)
		}
		for name, f := range map[string]AuditFilter{"actor": {Actor: odd}, "action": {Action: odd},
			"action prefix": {Action: odd + "."}, "target": {Target: odd}} {
			if got, err := s.ListAudit(ctx, f); err != nil || len(got) != 0 {
				t.Errorf("audit by %s %q: %d, %v; want none and no error", name, odd, len(got), err)
			}
		}
		if _, err := s.CheckPassword(ctx, odd, "a long enough password"); !errors.Is(err, ErrBadPassword) {
			t.Errorf("login as %q: %v, want %v", odd, err, ErrBadPassword)
		}
	}
}
