package store

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// refuseRows makes the database refuse, with the message "refused by the test",
// every row of table whose column is value (a trigger on either backend).
func refuseRows(t *testing.T, s *Store, table, column, value string) {
	t.Helper()
	ddl := []string{fmt.Sprintf(`CREATE TRIGGER refuse_%[1]s BEFORE INSERT ON %[1]s WHEN NEW.%[2]s = '%[3]s'
		BEGIN SELECT RAISE(ABORT, 'refused by the test'); END`, table, column, value)}
	if s.pg {
		ddl = []string{
			fmt.Sprintf(`CREATE FUNCTION refuse_%[1]s() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN IF NEW.%[2]s = '%[3]s' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$`,
				table, column, value),
			fmt.Sprintf(`CREATE TRIGGER refuse_%[1]s BEFORE INSERT ON %[1]s FOR EACH ROW EXECUTE FUNCTION refuse_%[1]s()`, table),
		}
	}
	err := s.exclusive(context.Background(), func(c *sql.Conn) error {
		for _, q := range ddl {
			if _, err := c.ExecContext(context.Background(), q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// probeTable creates later_probe (v TEXT), whose rows the database refuses
// when v is "bad".
func probeTable(t *testing.T, s *Store) {
	t.Helper()
	err := s.exclusive(context.Background(), func(c *sql.Conn) error {
		_, err := c.ExecContext(context.Background(), `CREATE TABLE later_probe (v TEXT NOT NULL)`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	refuseRows(t, s, "later_probe", "v", "bad")
}

// On PostgreSQL an add's audit row is sent after the add's other statements, in
// one round trip (wtxlater.go). When the database refuses it, that add fails
// with the audit's error and leaves no todo, and the adds it shared batches
// with are not touched.
func TestAnAuditRowRefusedLaterFailsItsAddAlone(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	refuseRows(t, s, "audit", "detail", "queue=boom")
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			q := "fine"
			if i%4 == 0 {
				q = "boom"
			}
			_, errs[i] = s.AddTodo(ctx, NewTodo{Queue: q, Payload: fmt.Sprintf("todo %d", i)})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		switch {
		case i%4 != 0 && err != nil:
			t.Errorf("add %d to fine: %v", i, err)
		case i%4 == 0 && (err == nil || !strings.Contains(err.Error(), "store: audit todo.add: ") ||
			!strings.Contains(err.Error(), "refused by the test")):
			t.Errorf("add %d to boom: %v, want the audit row's refusal", i, err)
		}
	}
	for q, want := range map[string]int{"fine": 30, "boom": 0} {
		list, err := s.ListTodos(ctx, TodoFilter{Queues: []string{q}})
		if err != nil || len(list) != want {
			t.Errorf("queue %s holds %d todos (%v), want %d", q, len(list), err, want)
		}
	}
	counts, err := s.QueueCounts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if want := "[{fine pending 30}]"; fmt.Sprint(counts) != want {
		t.Errorf("queue counts %v, want %s", counts, want)
	}
}

// What a write queued is undone with it, whether the write fails in Go or in
// the database, and a queued statement's failure is the write's even when the
// write ignores what its next statement said. A statement PostgreSQL cannot
// prepare fails its own write, not the writes that share its transaction. A
// boolean column reads into a bool when something was queued before it.
func TestStatementsSentLaterShareTheirWritesFate(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	probeTable(t, s)
	insert := func(w *wtx, v string) error {
		return w.later("probe "+v, `INSERT INTO later_probe (v) VALUES (?)`, v)
	}
	changedMyMind := errors.New("changed my mind")
	writes := map[string]struct {
		fn   func(w *wtx) error
		want string // the write's error, "" for none
	}{
		"fails in Go": {func(w *wtx) error {
			if err := insert(w, "a"); err != nil {
				return err
			}
			return changedMyMind
		}, "changed my mind"},
		"fails in Go after a round trip": {func(w *wtx) error {
			if err := insert(w, "b"); err != nil {
				return err
			}
			if _, err := w.exec(`INSERT INTO later_probe (v) VALUES ('c')`); err != nil {
				return err
			}
			if err := insert(w, "d"); err != nil {
				return err
			}
			return changedMyMind
		}, "changed my mind"},
		"refused, its refusal ignored": {func(w *wtx) error {
			if err := insert(w, "bad"); err != nil {
				return err
			}
			var n int
			w.queryRow(`SELECT count(*) FROM later_probe`).Scan(&n)
			return insert(w, "g")
		}, "probe bad: "},
		"names a table the schema lacks": {func(w *wtx) error {
			return w.later("probe missing", `INSERT INTO no_such_table (v) VALUES (?)`, "x")
		}, "probe missing: "},
		"reads a boolean": {func(w *wtx) error {
			if err := insert(w, "h"); err != nil {
				return err
			}
			var seen bool
			if err := w.queryRow(`SELECT EXISTS (SELECT 1 FROM later_probe WHERE v = 'h')`).Scan(&seen); err != nil {
				return err
			}
			if !seen {
				return errors.New("its own row unseen")
			}
			return nil
		}, ""},
		"succeeds": {func(w *wtx) error {
			if err := insert(w, "e"); err != nil {
				return err
			}
			return insert(w, "f")
		}, ""},
	}
	const rounds = 5
	var wg sync.WaitGroup
	for name, c := range writes {
		for range rounds {
			wg.Add(1)
			go func() {
				defer wg.Done()
				err := s.write(ctx, c.fn)
				if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
					t.Errorf("%s: %v, want %q", name, err, c.want)
				}
			}()
		}
	}
	wg.Wait()
	rows, err := s.rdb.QueryContext(ctx, `SELECT v, count(*) FROM later_probe GROUP BY v ORDER BY v`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var v string
		var n int
		if err := rows.Scan(&v, &n); err != nil {
			t.Fatal(err)
		}
		got = append(got, fmt.Sprintf("%s×%d", v, n))
	}
	if want := fmt.Sprintf("[e×%d f×%d h×%d]", rounds, rounds, rounds); fmt.Sprint(got) != want {
		t.Fatalf("later_probe holds %v, want %s", got, want)
	}
}

// A rotation's first statement reads a boolean (keyedQuery); sharing a batch
// with other writes, it is sent behind the rotation's savepoint (wtxlater.go).
func TestARotationBesideOtherWritesReadsItsBoolean(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	h := mustWebhook(t, s, NewWebhook{SourceType: "github", Queue: "inbox", Secret: "one", CreatedBy: "human:1"})
	var wg sync.WaitGroup
	errs := make([]error, 20)
	for i := range errs {
		wg.Add(2)
		go func() {
			defer wg.Done()
			_, errs[i] = s.RotateWebhook(ctx, h.ID, 0, fmt.Sprintf("secret-%d", i), 0, "human:1")
		}()
		go func() {
			defer wg.Done()
			if _, err := s.AddTodo(ctx, NewTodo{Queue: "other", Payload: "x"}); err != nil {
				t.Errorf("add: %v", err)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("rotate %d: %v", i, err)
		}
	}
}

// On PostgreSQL a write that may run again carries the last statements of the
// write before it in its first round trip (wtxlater.go). In one batch: a
// carried tail that is refused fails its own write, and the write that carried
// it runs again and sees none of it; a write that may not run again, a write
// that fails in Go before any round trip, and the batch's end each send the
// carry on its own.
func TestACarriedTailDecidesItsOwnWrite(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	probeTable(t, s)
	insert := func(w *wtx, vs ...string) error {
		for _, v := range vs {
			if err := w.later("probe "+v, `INSERT INTO later_probe (v) VALUES (?)`, v); err != nil {
				return err
			}
		}
		return nil
	}
	// A round trip in the middle of a write, as a delivery's lookup is: it
	// carries the tail of the write before, and this write's own tail waits.
	roundTrip := func(w *wtx, seen *int) error {
		return w.queryRow(`SELECT count(*) FROM later_probe WHERE v = 'b1'`).Scan(seen)
	}
	var scratch int
	seen := -1 // how many b1 rows the third write saw on its last run
	runs := 0  // how many times the write that may not run again ran
	writes := []struct {
		req  *writeReq
		want string
	}{
		{rerunReq(ctx, func(w *wtx) error { return cmp.Or(insert(w, "a1"), roundTrip(w, &scratch), insert(w, "a2")) }), ""},
		{rerunReq(ctx, func(w *wtx) error { return cmp.Or(insert(w, "b1"), roundTrip(w, &scratch), insert(w, "bad")) }), "probe bad: "},
		{rerunReq(ctx, func(w *wtx) error { return cmp.Or(insert(w, "c1"), roundTrip(w, &seen)) }), ""},
		{rerunReq(ctx, func(w *wtx) error { return cmp.Or(roundTrip(w, &scratch), insert(w, "bad")) }), "probe bad: "},
		{fnReq(ctx, func(w *wtx) error {
			runs++
			return insert(w, "d1")
		}), ""},
		{rerunReq(ctx, func(w *wtx) error { return cmp.Or(insert(w, "e1"), errors.New("changed my mind")) }), "changed my mind"},
		{rerunReq(ctx, func(w *wtx) error { return insert(w, "bad") }), "probe bad: "},
	}
	errs := make([]error, len(writes))
	var fns []func()
	for i, wr := range writes {
		fns = append(fns, func() { errs[i] = s.submit(ctx, wr.req) })
	}
	inOneBatch(t, s, fns...)
	for i, wr := range writes {
		if err := errs[i]; wr.want == "" && err != nil || wr.want != "" && (err == nil || !strings.Contains(err.Error(), wr.want)) {
			t.Errorf("write %d: %v, want %q", i+1, err, wr.want)
		}
	}
	if seen != 0 {
		t.Errorf("the third write saw %d rows of the refused second one, want 0", seen)
	}
	if runs != 1 {
		t.Errorf("the write that may not run again ran %d times", runs)
	}
	var got []string
	rows, err := s.rdb.QueryContext(ctx, `SELECT v FROM later_probe ORDER BY v`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var v string
		if err := rows.Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	if want := "[a1 a2 c1 d1]"; fmt.Sprint(got) != want {
		t.Errorf("later_probe holds %v, want %s", got, want)
	}
}

// Adds may run again (rerunReq): an add whose first round trip carried the
// refused tail of the write before it runs again from its start, and is stored
// once, with its audit row, under the id it answered; the agent's add, whose
// first statement counts its pending adds, counts again.
func TestAnAddThatCarriedARefusedTailIsStoredOnce(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	probeTable(t, s)
	refused := func() *writeReq {
		return rerunReq(ctx, func(w *wtx) error { return w.later("probe bad", `INSERT INTO later_probe (v) VALUES ('bad')`) })
	}
	var (
		errs     [4]error
		added    [2]Todo
		payloads = [2]string{"by hand", "by an agent"}
	)
	// Each add in a batch of its own behind the refused write, whose tail its
	// first round trip carries (with both in one batch, the second refused
	// write would carry the first add's tail instead).
	inOneBatch(t, s,
		func() { errs[0] = s.submit(ctx, refused()) },
		func() { added[0], errs[1] = s.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: payloads[0]}) },
	)
	inOneBatch(t, s,
		func() { errs[2] = s.submit(ctx, refused()) },
		func() {
			added[1], errs[3] = s.AddAgentTodo(ctx, "agent:a", "inbox", payloads[1], []string{"inbox"}, TodoOptions{})
		},
	)
	for i, err := range errs {
		if refusedWant := i%2 == 0; refusedWant != (err != nil) {
			t.Errorf("write %d: %v (refused: want %v)", i+1, err, refusedWant)
		}
	}
	for i, want := range added {
		if want.ID == 0 {
			continue
		}
		got, err := s.Todo(ctx, want.ID)
		if err != nil || got.Payload != payloads[i] {
			t.Errorf("todo %d: %+v, %v; want the payload %q", want.ID, got, err, payloads[i])
		}
		var rows, audits int
		if err := s.rdb.QueryRowContext(ctx, s.q(`SELECT count(*) FROM todos WHERE payload_size = ?`), len(payloads[i])).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if err := s.rdb.QueryRowContext(ctx, s.q(`SELECT count(*) FROM audit WHERE target = ?`), fmt.Sprintf("todo:%d", want.ID)).Scan(&audits); err != nil {
			t.Fatal(err)
		}
		if rows != 1 || audits != 1 {
			t.Errorf("todo %d (%q): %d todos of its size and %d audit rows, want 1 and 1", want.ID, payloads[i], rows, audits)
		}
	}
	var probes int
	if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM later_probe`).Scan(&probes); err != nil || probes != 0 {
		t.Errorf("later_probe holds %d rows (%v), want none", probes, err)
	}
}
