package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/internal/opfile"
	"github.com/switchboardhq/switchboard/internal/textcut"
	"github.com/switchboardhq/switchboard/store"
)

const todoSynopsis = `todo add --queue Q (--payload TEXT | --payload-file F | -) [--max-attempts N] [--key K] [--priority P]
                            [--delay D] [--coalesce [--debounce D] [--debounce-max D]] [--json] [--db FILE]
       switchboard todo list [--queue Q] [--state S] [--key K] [--source S] [--type T] [--error TEXT] [--holder AGENT]
                             [--limit N] [--before ID] [--json] [--db FILE]
       switchboard todo show ID [--json] [--db FILE]
       switchboard todo release ID [--db FILE]   (a claimed todo back on its queue, whoever holds it)
       switchboard todo retry (ID... | --all-failed [--queue Q] [--error TEXT]) [--json] [--db FILE]
       switchboard todo cancel ID [--db FILE]    (a pending or claimed todo ends; never retried by itself)`

// maxPayload bounds a todo's payload, like the webhook body bound.
const maxPayload = 1 << 20

func runTodo(ctx context.Context, env *environ, args []string) error {
	return dispatch(ctx, env, args, todoSynopsis, subcommand{"add", todoAdd}, subcommand{"list", todoList},
		subcommand{"show", todoShow}, subcommand{"release", todoRelease}, subcommand{"retry", todoRetry},
		subcommand{"cancel", todoCancel})
}

func todoAdd(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "todo add", todoSynopsis)
	db := dbFlag(fs, env)
	queue := fs.String("queue", "", "queue to add to (required)")
	payload := fs.String("payload", "", "payload text (JSON recommended)")
	payloadFile := fs.String("payload-file", "", "read the payload from this file")
	maxAttempts := fs.Int("max-attempts", store.DefaultMaxAttempts, "claims before the todo is dead-lettered")
	var opts store.TodoOptions
	todoOptionFlags(fs, &opts)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := opts.ValidateNew(); err != nil {
		return usageErr("%s", err)
	}
	fromStdin := false
	switch {
	case fs.NArg() == 1 && fs.Arg(0) == "-":
		fromStdin = true
	case fs.NArg() > 0:
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	if *queue == "" {
		return usageErr("--queue is required")
	}
	if !store.ValidQueueName(*queue) {
		return usageErr("%q is not a valid queue name (letters, digits and . _ - : /)", *queue)
	}
	if *maxAttempts < 1 {
		return usageErr("--max-attempts must be at least 1")
	}
	// --payload '' is an empty payload asked for; no payload at all is more likely
	// a forgotten one.
	payloadSet := flagSet(fs, "payload")
	sources := 0
	for _, b := range []bool{payloadSet, *payloadFile != "", fromStdin} {
		if b {
			sources++
		}
	}
	if sources > 1 {
		return usageErr("give the payload one way: --payload, --payload-file or - (stdin)")
	}
	if sources == 0 {
		return usageErr("no payload: give --payload TEXT, --payload-file FILE or - (stdin); --payload '' adds an empty one")
	}
	body := *payload
	switch {
	case *payloadFile != "":
		b, err := opfile.Read(*payloadFile, maxPayload)
		if err != nil {
			return fmt.Errorf("read payload: %w", err)
		}
		body = string(b)
	case fromStdin:
		b, err := io.ReadAll(io.LimitReader(env.stdin, maxPayload+1))
		if err != nil {
			return fmt.Errorf("read payload: %w", err)
		}
		body = string(b)
	}
	if len(body) > maxPayload {
		return usageErr("payload is larger than %d bytes", maxPayload)
	}
	s, err := openStore(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	t, err := s.AddTodo(ctx, store.NewTodo{Queue: *queue, Payload: body, MaxAttempts: *maxAttempts,
		CreatedBy: "human:cli", Options: opts})
	if err != nil {
		return err
	}
	if *asJSON {
		return writeJSON(env, t)
	}
	printAdded(env, t)
	return nil
}

// todoOptionFlags declares todo add's flow-control flags into o.
func todoOptionFlags(fs *flag.FlagSet, o *store.TodoOptions) {
	fs.StringVar(&o.Key, "key", "", "a key (e.g. octo/repo#42): one todo per key and queue is worked at a time, in order")
	fs.IntVar(&o.Priority, "priority", 0, fmt.Sprintf("claimed before lower priorities (%d to %d)", store.MinPriority, store.MaxPriority))
	fs.DurationVar(&o.Delay, "delay", 0, "not claimable before this long from now (e.g. 90s, 10m)")
	fs.BoolVar(&o.Coalesce, "coalesce", false, "with --key: fold into the key's pending todo, if it has one")
	fs.DurationVar(&o.Debounce, "debounce", 0, "with --coalesce: claimable only once no todo of the key came for this long")
	fs.DurationVar(&o.DebounceMax, "debounce-max", 0, "with --debounce: claimable at the latest this long after the first (default 10 debounces)")
}

// printAdded says what todo add did.
func printAdded(env *environ, t store.Todo) {
	switch {
	case t.Folded:
		fmt.Fprintf(env.stdout, "folded into todo %d on %s (pending; coalesced %d)\n", t.ID, t.Queue, t.Coalesced)
	case t.KeyWaiting:
		fmt.Fprintf(env.stdout, "todo %d added to %s, waiting behind an earlier todo of key %s\n", t.ID, t.Queue, t.Key)
	default:
		fmt.Fprintf(env.stdout, "todo %d added to %s\n", t.ID, t.Queue)
	}
}

func todoList(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "todo list", todoSynopsis)
	db := dbFlag(fs, env)
	queue := fs.String("queue", "", "only this queue")
	state := fs.String("state", "", "only this state (pending, claimed, done, failed)")
	limit := fs.Int("limit", 50, "at most this many rows (max 1000)")
	before := fs.Int64("before", 0, "only todos with a lower id: the next page after the lowest id shown")
	var search store.TodoSearch
	searchFlags(fs, &search)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *before < 0 {
		return usageErr("--before must be a todo id")
	}
	switch *state {
	case "", store.StatePending, store.StateClaimed, store.StateDone, store.StateFailed:
	default:
		return usageErr("--state must be pending, claimed, done or failed")
	}
	if *limit < 1 || *limit > 1000 {
		return usageErr("--limit must be between 1 and 1000")
	}
	s, err := openStoreRO(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	// One row more than shown says whether there is a next page.
	f := store.TodoFilter{State: *state, Before: *before, Limit: *limit + 1, Search: search}
	if *queue != "" {
		f.Queues = []string{*queue}
	}
	todos, next, err := todoPage(ctx, s, f, *limit)
	if err != nil {
		return err
	}
	if next != 0 {
		// On stderr, so that stdout stays the rows (and --json a list).
		fmt.Fprintf(env.stderr, "showing the newest %d; older ones: --before %d (or a larger --limit, up to 1000)\n", len(todos), next)
	}
	return printList(env, *asJSON, todos, table[store.Todo]{none: noTodos(f, *queue), row: todoRow,
		header: "ID\tQUEUE\tSTATE\tKEY\tPRI\tSIZE\tSOURCE\tOWNER\tATTEMPTS\tCREATED"})
}

// todoPage lists up to limit todos of f (whose Limit is limit+1), and the
// --before of the next page, or 0 when there is none.
func todoPage(ctx context.Context, s *store.Store, f store.TodoFilter, limit int) ([]store.Todo, int64, error) {
	todos, err := s.ListTodos(ctx, f)
	if err != nil {
		return nil, 0, err
	}
	todos, next := store.PageOf(todos, limit)
	if next == 0 && len(todos) == 1000 {
		// The store lists at most 1000: at --limit 1000 the row more is not among
		// them, so it is asked for apart.
		f.Before, f.Limit = todos[len(todos)-1].ID, 1
		older, err := s.ListTodos(ctx, f)
		if err != nil {
			return nil, 0, err
		}
		if len(older) > 0 {
			next = f.Before
		}
	}
	return todos, next, nil
}

// noTodos says that no todo is listed, and which were asked for.
func noTodos(f store.TodoFilter, queue string) string {
	what := "todos"
	if f.State != "" {
		what = f.State + " todos"
	}
	if queue != "" {
		what += " on " + queue
	}
	if !f.Search.IsZero() {
		what += " that match"
	}
	if f.Before > 0 {
		what += fmt.Sprintf(" older than %d", f.Before)
	}
	return "no " + what
}

// todoRow is t's row in todo list. A key comes from a webhook's body: it is
// shown printable, and cut to keyColumn characters (--json has it whole).
func todoRow(t store.Todo) string {
	key := dash(textcut.Runes(printable(t.Key), keyColumn))
	if t.KeyWaiting {
		key += " (waits)"
	}
	return fmt.Sprintf("%d\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%d/%d\t%s", t.ID, t.Queue, stateLabel(t), key, t.Priority,
		t.PayloadSize, t.Source.Type, dash(t.Owner), t.Attempts, t.MaxAttempts, t.CreatedAt.Local().Format(time.DateTime))
}

// keyColumn is the widest a key is shown in todo list.
const keyColumn = 32

// todoRelease hands a claimed todo back to its queue on an operator's word,
// whoever holds it (an agent that died with a long lease), as the board's
// Release does: its claim does not count as an attempt. A serve running on the
// same database rings its agents' doorbells for it.
func todoRelease(ctx context.Context, env *environ, args []string) error {
	return onID(ctx, env, args, "todo release", todoSynopsis, "todo",
		func(ctx context.Context, s *store.Store, id int64) error {
			held, err := s.Todo(ctx, id)
			if err != nil {
				return err
			}
			t, err := s.ReleaseByHuman(ctx, id, "human:cli")
			if err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "todo %d is pending again on %s; the claim %s held does not count as an attempt\n",
				t.ID, t.Queue, printable(held.Owner))
			return nil
		})
}

// todoRetry puts dead-lettered todos back on their queues, attempts reset: the ones
// named, or with --all-failed every one (on --queue). A serve running on the same
// database rings its agents' doorbells for them.
func todoRetry(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "todo retry", todoSynopsis)
	db := dbFlag(fs, env)
	all := fs.Bool("all-failed", false, "retry every failed todo (on --queue only, when given)")
	queue := fs.String("queue", "", "with --all-failed: only this queue")
	lastError := fs.String("error", "", "with --all-failed: only those whose last error is exactly this")
	asJSON := fs.Bool("json", false, "print JSON")
	// Ids may come before the flags (`retry 12 13 --db F`) or after them.
	lead := 0
	for lead < len(args) && !strings.HasPrefix(args[lead], "-") {
		lead++
	}
	if err := parse(fs, args[lead:]); err != nil {
		return err
	}
	var ids []int64
	for _, a := range append(args[:lead:lead], fs.Args()...) {
		id, err := strconv.ParseInt(a, 10, 64)
		if err != nil || id < 1 {
			return usageErr("%q is not a todo id", a)
		}
		ids = append(ids, id)
	}
	switch {
	case *all && len(ids) > 0:
		return usageErr("give todo ids or --all-failed, not both")
	case !*all && len(ids) == 0:
		return usageErr("name the todos to retry, or give --all-failed")
	case (*queue != "" || flagSet(fs, "error")) && !*all:
		return usageErr("--queue and --error go with --all-failed")
	case *queue != "" && !store.ValidQueueName(*queue):
		return usageErr("%q is not a valid queue name (letters, digits and . _ - : /)", *queue)
	}
	// A database made here would have nothing to retry: a mistyped --db is reported.
	s, err := openExisting(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	if *all {
		f := store.Failed{Queue: *queue}
		if flagSet(fs, "error") {
			f.Error = lastError
		}
		return retryAllFailed(ctx, env, s, f, *asJSON)
	}
	return retryTodos(ctx, env, s, ids, *asJSON)
}

// retryAllFailed retries every failed todo f names, and says how many.
func retryAllFailed(ctx context.Context, env *environ, s *store.Store, f store.Failed, asJSON bool) error {
	n, err := s.RetryFailed(ctx, f, "human:cli")
	if err != nil {
		return err
	}
	if asJSON {
		return writeJSON(env, map[string]any{"retried": n, "queue": f.Queue})
	}
	where := "any queue"
	if f.Queue != "" {
		where = f.Queue
	}
	if f.Error != nil {
		where += fmt.Sprintf(" with error %q", *f.Error)
	}
	switch n {
	case 0:
		fmt.Fprintf(env.stdout, "no failed todos on %s: nothing to retry\n", where)
	case 1:
		fmt.Fprintf(env.stdout, "1 failed todo on %s is back on its queue, attempts reset\n", where)
	default:
		fmt.Fprintf(env.stdout, "%d failed todos on %s are back on their queues, attempts reset\n", n, where)
	}
	return nil
}

// retryTodos retries the todos ids names, one at a time, each its own write: a
// todo that cannot be retried (not failed, or no such todo) is reported and the
// rest still are.
func retryTodos(ctx context.Context, env *environ, s *store.Store, ids []int64, asJSON bool) error {
	var retried []store.Todo
	var failed []string
	for _, id := range ids {
		t, err := s.Retry(ctx, id, "human:cli")
		if err != nil {
			failed = append(failed, cliMessage("", err))
			continue
		}
		retried = append(retried, t)
	}
	if asJSON {
		if err := writeJSONList(env, retried); err != nil {
			return err
		}
	} else {
		for _, t := range retried {
			waits := ""
			if t.KeyWaiting {
				waits = "; it waits behind an earlier todo of key " + printable(t.Key)
			}
			fmt.Fprintf(env.stdout, "todo %d is back on %s, attempts reset%s\n", t.ID, t.Queue, waits)
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d of %d not retried:\n  %s", len(failed), len(ids), strings.Join(failed, "\n  "))
	}
	return nil
}

// flagSet says whether the flag name was given, even as "".
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func dash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
