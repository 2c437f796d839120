package store

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"testing"
	"time"
)

// The set-based statements of a pipelined batch run by their generic plans,
// planned once per connection. Left to choose, PostgreSQL planned the claim of
// several anew on each run once its queue was deep (at 40,000 pending), and the
// planning took longer than the run. Eight workers drain a queue, each
// completing a todo and claiming the next in one call, as the bench does; then
// the writer's own session says how each statement was planned.
func TestPipelinedSetsRunByGenericPlans(t *testing.T) {
	s := pgSeeded(t, "q", 400)
	ctx := context.Background()
	queues := []string{"q"}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			owner := fmt.Sprintf("agent:w%d", w)
			t, ok, err := s.ClaimNext(ctx, owner, queues, time.Minute)
			for ok && err == nil {
				var next Next
				_, next, err = s.CompleteThenClaim(ctx, Ack{ID: t.ID, Owner: owner, LeaseSeq: t.LeaseSeq, Queues: queues}, "", queues, time.Minute)
				if err == nil {
					err = next.Err
				}
				t, ok = next.Todo, next.OK
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	plans := map[string][2]int64{}
	err := s.exclusive(ctx, func(c *sql.Conn) error {
		rows, err := c.QueryContext(ctx, `SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var text string
			var generic, custom int64
			if err := rows.Scan(&text, &generic, &custom); err != nil {
				return err
			}
			plans[text] = [2]int64{generic, custom}
		}
		return rows.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, query := range map[string]string{"the claim of several": pgClaimSet, "the complete of several": pgCompleteSet} {
		p, ok := plans[s.q(query)]
		switch {
		case !ok || p[0]+p[1] == 0:
			t.Errorf("%s never ran in the writer's session: eight workers made no batch of several", name)
		case p[1] > 0:
			t.Errorf("%s was planned for its arguments %d times of %d, want its generic plan each time", name, p[1], p[0]+p[1])
		}
	}
}
