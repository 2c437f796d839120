package cli

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

const queueSynopsis = `queue list [--json] [--db FILE]
       switchboard queue pause NAME [--db FILE]    (its todos are not claimable; deliveries still land)
       switchboard queue resume NAME [--db FILE]`

func runQueue(ctx context.Context, env *environ, args []string) error {
	return dispatch(ctx, env, args, queueSynopsis, subcommand{"list", queueList},
		subcommand{"pause", queuePause}, subcommand{"resume", queueResume})
}

// queueRow is one queue as queue list shows it.
type queueRow struct {
	Queue            string     `json:"queue"`
	Pending          int64      `json:"pending"`
	Claimed          int64      `json:"claimed"`
	AwaitingApproval int64      `json:"awaiting_approval"`
	Failed           int64      `json:"failed"`
	Paused           bool       `json:"paused"`
	PausedBy         string     `json:"paused_by,omitempty"`
	PausedAt         *time.Time `json:"paused_at,omitempty"`
}

func queueList(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "queue list", queueSynopsis)
	db := dbFlag(fs, env)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	s, err := openStoreRO(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	rows, err := queueRows(ctx, s)
	if err != nil {
		return err
	}
	return printList(env, *asJSON, rows, table[queueRow]{none: "no queues: no todo was ever added",
		header: "QUEUE\tPENDING\tCLAIMED\tAWAITING APPROVAL\tFAILED\tPAUSED",
		row: func(q queueRow) string {
			paused := "-"
			if q.Paused {
				paused = "paused by " + printable(q.PausedBy) + " at " + q.PausedAt.Local().Format(time.DateTime)
			}
			return fmt.Sprintf("%s\t%d\t%d\t%d\t%d\t%s", q.Queue, q.Pending, q.Claimed,
				q.AwaitingApproval, q.Failed, paused)
		}})
}

// queueRows gathers every queue that has todos or is paused, by name.
func queueRows(ctx context.Context, s *store.Store) ([]queueRow, error) {
	counts, err := s.QueueCounts(ctx)
	if err != nil {
		return nil, err
	}
	paused, err := s.PausedQueues(ctx)
	if err != nil {
		return nil, err
	}
	waits, err := s.QueueWaits(ctx)
	if err != nil {
		return nil, err
	}
	byName := map[string]*queueRow{}
	row := func(q string) *queueRow {
		if byName[q] == nil {
			byName[q] = &queueRow{Queue: q}
		}
		return byName[q]
	}
	for _, c := range counts {
		r := row(c.Queue)
		switch c.State {
		case store.StatePending:
			r.Pending = c.Count
		case store.StateClaimed:
			r.Claimed = c.Count
		case store.StateFailed:
			r.Failed = c.Count
		}
	}
	// A todo awaiting approval is claimed, by a worker that waits: it is
	// counted there, not among the claimed, in the table and in --json alike.
	for q, n := range waits {
		r := row(q)
		r.AwaitingApproval = n
		r.Claimed = max(r.Claimed-n, 0)
	}
	for _, p := range paused {
		r := row(p.Queue)
		r.Paused, r.PausedBy, r.PausedAt = true, p.PausedBy, &p.PausedAt
	}
	out := make([]queueRow, 0, len(byName))
	for _, r := range byName {
		out = append(out, *r)
	}
	slices.SortFunc(out, func(a, b queueRow) int { return strings.Compare(a.Queue, b.Queue) })
	return out, nil
}

func queuePause(ctx context.Context, env *environ, args []string) error {
	return onQueue(ctx, env, args, "queue pause", func(s *store.Store, q string) error {
		if err := s.PauseQueue(ctx, q, "human:cli"); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "queue %s is paused: its todos are not claimable until `switchboard queue resume %s`\n", q, q)
		return nil
	})
}

func queueResume(ctx context.Context, env *environ, args []string) error {
	return onQueue(ctx, env, args, "queue resume", func(s *store.Store, q string) error {
		if err := s.ResumeQueue(ctx, q, "human:cli"); err != nil {
			return err
		}
		fmt.Fprintf(env.stdout, "queue %s is running again; agents waiting on it are woken\n", q)
		return nil
	})
}

// onQueue runs a subcommand on the queue NAME its one argument names.
func onQueue(ctx context.Context, env *environ, args []string, name string, act func(*store.Store, string) error) error {
	fs := newFlags(env, name, queueSynopsis)
	db := dbFlag(fs, env)
	// The name may come before the flags (`pause inbox --db F`) or after them.
	var q string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		q, args = args[0], args[1:]
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	switch {
	case q == "" && fs.NArg() == 1:
		q = fs.Arg(0)
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	case q == "":
		return usageErr("name the queue")
	}
	if !store.ValidQueueName(q) {
		return usageErr("%q is not a valid queue name (letters, digits and . _ - : /)", q)
	}
	s, err := openExisting(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	return act(s, q)
}
