package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// PostgreSQL stopped and started under a serving Store: what was acknowledged
// before is all there after, writes during the outage fail (and leave nothing),
// Ping fails meanwhile, and afterwards the same Store reads, writes and hears
// another process's commits again without being reopened.
func TestStoreSurvivesARestartOfPostgreSQL(t *testing.T) {
	c := testkit.StartCluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := c.URL("postgres", c.Password, "postgres")
	s, err := Open(ctx, url, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rang := make(chan TodoChange, 100)
	s.OnTodoChange(func(c TodoChange) { rang <- c })
	watching := make(chan struct{})
	// An hour: only the notification, through a listener that reconnected by
	// itself, can ring for another process's add after the restart.
	go func() { s.WatchForeign(ctx, time.Hour); close(watching) }()
	var acked []int64
	for i := range 20 {
		td, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: fmt.Sprint("before ", i)})
		if err != nil {
			t.Fatal(err)
		}
		acked = append(acked, td.ID)
	}

	c.Stop()
	if err := s.Ping(ctx); err == nil {
		t.Fatal("Ping answered with the server stopped")
	}
	octx, ocancel := context.WithTimeout(ctx, 2*time.Minute) // a guard against a hang, not a timing
	defer ocancel()
	for i := range 3 {
		_, err := s.AddTodo(octx, NewTodo{Queue: "inbox", Payload: fmt.Sprint("during ", i)})
		if err == nil {
			t.Fatal("a write succeeded with the server stopped")
		}
		if strings.Contains(err.Error(), c.Password) {
			t.Fatalf("the error shows the password: %v", err)
		}
	}

	c.Start()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping after the restart: %v", err)
	}
	after, err := s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "after"})
	if err != nil {
		t.Fatalf("the first write after the restart: %v", err)
	}
	todos, err := s.ListTodos(ctx, TodoFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(todos) != len(acked)+1 {
		t.Fatalf("after the restart the queue holds %d todos, want the %d acknowledged and %d", len(todos), len(acked), after.ID)
	}
	for i, id := range append(acked, after.ID) {
		want := fmt.Sprint("before ", i)
		if id == after.ID {
			want = "after"
		}
		if td, err := s.Todo(ctx, id); err != nil || td.Payload != want {
			t.Fatalf("acknowledged todo %d after the restart: %q, %v; want %q", id, td.Payload, err, want)
		}
	}

	// The watch's listener reconnected: another process's add rings here.
	for drained := false; !drained; {
		select {
		case <-rang:
		default:
			drained = true
		}
	}
	cli, err := Open(ctx, url, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	foreign, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "from the CLI"})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case c := <-rang:
		if c.ID != foreign.ID {
			t.Fatalf("rang %+v, want the CLI's todo %d", c, foreign.ID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("after the restart another process's add never rang")
	}
	cancel()
	<-watching
}

// Each way PostgreSQL can refuse serve at start is one line that says what to
// do, and never the password.
func TestOpenPostgresRefusals(t *testing.T) {
	c := testkit.StartCluster(t)
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, c.URL("postgres", c.Password, "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE ROLE visitor LOGIN PASSWORD 'visitor-secret'`); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	ln.Close()
	// Switchboard's tables, made by postgres in a schema visitor may use.
	if _, err := admin.Exec(ctx, `CREATE SCHEMA taken; GRANT USAGE, CREATE ON SCHEMA taken TO visitor`); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(ctx, c.URL("postgres", c.Password, "postgres")+"?search_path=taken", Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Fatal(err)
	} else {
		s.Close()
	}

	for _, tc := range []struct {
		name, url, secret string
		want              []string
		is                error
	}{
		{"unreachable", "postgres://postgres:" + c.Password + "@" + closed + "/postgres", c.Password,
			[]string{"PostgreSQL at " + closed, "refused"}, ErrUnreachable},
		{"wrong password", c.URL("postgres", "not-"+c.Password, "postgres"), "not-" + c.Password,
			[]string{"password authentication failed", `user "postgres"`, "check the user and password"}, ErrUnreachable},
		{"no such database", c.URL("postgres", c.Password, "nosuch"), c.Password,
			[]string{`database "nosuch" does not exist`, "createdb --owner=postgres nosuch"}, ErrUnreachable},
		{"no right to create tables", c.URL("visitor", "visitor-secret", "postgres"), "visitor-secret",
			[]string{"postgres://visitor@", "may not create tables", `GRANT CREATE ON SCHEMA "public" TO "visitor"`}, nil},
		{"tables another role made", c.URL("visitor", "visitor-secret", "postgres") + "?search_path=taken", "visitor-secret",
			[]string{"postgres://visitor@", `the role "visitor" may not use Switchboard's tables in the schema "taken"`,
				`the role "postgres" made them`, "ALTER TABLE"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Open(ctx, tc.url, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err == nil {
				s.Close()
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, tc.secret) || strings.Contains(msg, "\n") {
				t.Errorf("error %q shows the password or is more than one line", msg)
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error %q is not %v", msg, tc.is)
			}
		})
	}
	// The statement the refusal gives, run as postgres, hands the tables over:
	// visitor opens them then. (REASSIGN OWNED BY postgres would be refused.)
	_, err = Open(ctx, c.URL("visitor", "visitor-secret", "postgres")+"?search_path=taken", Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	give := ""
	if err != nil {
		if _, rest, ok := strings.Cut(err.Error(), "DO $switchboard$"); ok {
			body, _, _ := strings.Cut(rest, "$switchboard$")
			give = "DO $switchboard$" + body + "$switchboard$"
		}
	}
	if give == "" {
		t.Fatalf("the refusal gives no statement: %v", err)
	}
	if _, err := admin.Exec(ctx, give); err != nil {
		t.Fatalf("%s: %v", give, err)
	}
	if s, err := Open(ctx, c.URL("visitor", "visitor-secret", "postgres")+"?search_path=taken", Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}); err != nil {
		t.Errorf("after %s: %v", give, err)
	} else {
		s.Close()
	}
	// A command that only reads names a search_path whose schema is not there.
	_, err = Open(ctx, c.URL("postgres", c.Password, "postgres")+"?search_path=nosuch",
		Options{MustExist: true, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err == nil || !strings.Contains(err.Error(), "names no schema that exists") || strings.Contains(err.Error(), c.Password) {
		t.Errorf("a read-only open of a missing schema: %v", err)
	}
}
