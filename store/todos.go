package store

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Todo states.
const (
	StatePending = "pending"
	StateClaimed = "claimed"
	StateDone    = "done"
	StateFailed  = "failed"
)

// DefaultMaxAttempts is how many claims a todo gets before it is dead-lettered.
const DefaultMaxAttempts = 5

// Todo is one unit of work on a queue. Payload is empty in listings (PayloadSize says
// how big it is); only claims and Todo load it.
type Todo struct {
	ID          int64      `json:"id"`
	Queue       string     `json:"queue"`
	State       string     `json:"state"`
	Payload     string     `json:"payload,omitempty"`
	PayloadSize int        `json:"payload_size"`
	Source      Source     `json:"source"`
	Trust       Trust      `json:"trust"`
	CreatedBy   string     `json:"created_by"`
	Owner       string     `json:"owner,omitempty"`
	Attempts    int        `json:"attempts"`
	MaxAttempts int        `json:"max_attempts"`
	LeaseSeq    int64      `json:"lease_seq"`
	LeaseExpiry *time.Time `json:"lease_expires_at,omitempty"`
	AvailableAt time.Time  `json:"available_at"`
	Result      string     `json:"result,omitempty"`
	LastError   string     `json:"last_error,omitempty"`
	CreatedAt   time.Time  `json:"created_at"`
	UpdatedAt   time.Time  `json:"updated_at"`
	FinishedAt  *time.Time `json:"finished_at,omitempty"`
	// CancelledBy is the human who cancelled the todo: it is failed, but not a
	// dead letter, and nothing retries it by itself.
	CancelledBy string `json:"cancelled_by,omitempty"`
	// Approval is the human gate's last question and its answer (see RequestApproval).
	Approval *Approval `json:"approval,omitempty"`
	// Waiting says what the todo waits for: "approval" (claimed, its lease stopped,
	// until a human decides) or "paused" (pending on a paused queue; set by
	// ListTodos).
	Waiting string `json:"waiting,omitempty"`
	// Flow control (see TodoOptions). KeyWaiting: the todo waits behind an
	// earlier todo of its key. Coalesced: how many later todos it absorbed.
	Key        string `json:"key,omitempty"`
	KeyWaiting bool   `json:"key_waiting,omitempty"`
	Priority   int    `json:"priority"`
	Coalesced  int    `json:"coalesced"`
	// Folded: AddTodo folded the new todo into this one, pending already.
	Folded bool `json:"folded,omitempty"`
}

// Approval is a question a worker asked a human before an irreversible step, and
// the human's answer.
type Approval struct {
	State    string `json:"state"` // asked, approved, denied
	Question string `json:"question"`
	Comment  string `json:"comment,omitempty"`
	By       string `json:"by,omitempty"` // the human who decided
}

// Source says where a todo came from.
type Source struct {
	Type      string `json:"type"` // manual, webhook source type (github, stripe, …), or replay
	WebhookID int64  `json:"webhook_id,omitempty"`
	EventID   int64  `json:"event_id,omitempty"`
	EventType string `json:"event_type,omitempty"`
}

// Trust records how far the content of a todo can be believed.
type Trust struct {
	Verified         bool   `json:"verified"`
	Mode             string `json:"mode"` // signed, token, none
	WebhookCreatedBy string `json:"webhook_created_by,omitempty"`
	// AddedBy is the agent that made the todo with add_todo (mode agent):
	// authenticated by its credential, its content not signed by anyone.
	AddedBy string `json:"added_by,omitempty"`
}

// TodoChange is announced after the commit that made it. Claimable is true when the
// todo became claimable (new, requeued, released, retried): the doorbell rings.
type TodoChange struct {
	ID        int64
	Queue     string
	State     string
	Source    string
	Claimable bool
	// ClaimableAt, when set, is when a todo that is not claimable yet becomes so
	// (the end of a retry's backoff): the store then announces it again, as
	// claimable, with the cause backoff_over.
	ClaimableAt time.Time
	// Cause names the transition: add, claim, complete, release, retry,
	// retry_backoff (fail with retry), dead_letter, lease_expired; and
	// backoff_over, which changes no state: the todo's backoff ended.
	Cause string

	auditID int64 // a return to the queue: its audit row (see wtx.requeued)
}

// OnTodoChange registers a hook run after every commit that changes todos. Hooks run
// on the writer goroutine right after the commit, before its callers are answered
// (with synchronous=FULL, also before the commit's sync: see writer.announce); the
// foreign-commit watch and a backoff's end (RingDue) run them from their own
// goroutines, so hooks may run concurrently. They must never block and must not
// call the store's write methods (the writer would wait for itself).
// Register hooks at wiring time, before traffic starts.
func (s *Store) OnTodoChange(fn func(TodoChange)) {
	s.hooksMu.Lock()
	s.hooks = append(s.hooks, fn)
	s.hooksMu.Unlock()
}

func (s *Store) fire(changes []TodoChange) {
	if len(changes) == 0 {
		return
	}
	s.hooksMu.RLock()
	hooks := s.hooks
	s.hooksMu.RUnlock()
	// Wake-ups first: a hook that panics must not lose a later change's.
	for _, c := range changes {
		if !c.ClaimableAt.IsZero() {
			s.wakeAt(c.ClaimableAt, TodoChange{ID: c.ID, Queue: c.Queue, State: StatePending, Source: c.Source,
				Claimable: true, Cause: "backoff_over"})
		}
	}
	for _, c := range changes {
		for _, h := range hooks {
			h(c)
		}
	}
}

// NewTodo is what AddTodo needs.
type NewTodo struct {
	Queue string
	// Payload is the todo's content. When Source.EventID is set, it must be that
	// event's body (or be left empty, with size set), which is stored once, with
	// the event, not again here.
	Payload     string
	MaxAttempts int // 0 = DefaultMaxAttempts
	Source      Source
	Trust       Trust
	CreatedBy   string // actor: human:<id>, agent:<id>, system
	Options     TodoOptions

	id int64 // a preassigned id (ingestion links event and todo without an UPDATE)
	// size, when set, is the payload's size, given instead of Payload by a caller
	// whose event holds it (ingestion: the body is not copied into a string only
	// to be measured).
	size int
	// idOnly: the caller needs only the todo's id (ingestion), so a fold does
	// not read the whole todo back.
	idOnly bool
}

// ValidQueueName reports whether q is a usable queue name: 1–128 characters of
// letters, digits and . _ - : /, starting with a letter or digit.
func ValidQueueName(q string) bool {
	if len(q) == 0 || len(q) > 128 {
		return false
	}
	for i, r := range q {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case i > 0 && strings.ContainsRune("._-:/", r):
		default:
			return false
		}
	}
	return true
}

func todoTarget(id int64) string { return fmt.Sprintf("todo:%d", id) }

func nullID(id int64) any {
	if id == 0 {
		return nil
	}
	return id
}

// todoColumns selects a compact todo (no payload); todoColumnsFull adds the payload.
const todoColumns = `id, queue, state, payload_size, source_type, coalesce(source_webhook_id, 0),
	coalesce(source_event_id, 0), source_event_type, verified, trust_mode, webhook_created_by, created_by,
	coalesce(owner, ''), attempts, max_attempts, lease_seq, lease_expires_at, available_at, result, last_error,
	created_at, updated_at, finished_at, cancelled_by, approval, approval_question, approval_comment, approval_by,
	coalesce(key, ''), key_waiting, priority, coalesced`

const todoColumnsFull = todoColumns + `, coalesce(
	(SELECT payload FROM todo_payloads WHERE todo_id = todos.id),
	(SELECT CAST(body AS TEXT) FROM webhook_events WHERE id = todos.source_event_id), '')`

type scanner interface{ Scan(dest ...any) error }

func scanTodo(sc scanner, full bool) (Todo, error) {
	if !full {
		return scanTodoAnd(sc)
	}
	var payload string
	t, err := scanTodoAnd(sc, &payload)
	t.Payload = payload
	return t, err
}

// scanTodoAnd reads a row of todoColumns and then the columns after them into more.
func scanTodoAnd(sc scanner, more ...any) (Todo, error) {
	var t Todo
	var lease, finished sql.NullInt64
	var avail, created, updated int64
	var ap Approval
	// Made with room for more (todoColumns are 32): appending them to a full
	// list would copy it.
	dest := append(make([]any, 0, 32+len(more)), &t.ID, &t.Queue, &t.State, &t.PayloadSize,
		&t.Source.Type, &t.Source.WebhookID, &t.Source.EventID, &t.Source.EventType, &t.Trust.Verified,
		&t.Trust.Mode, &t.Trust.WebhookCreatedBy, &t.CreatedBy, &t.Owner, &t.Attempts, &t.MaxAttempts,
		&t.LeaseSeq, &lease, &avail, &t.Result, &t.LastError, &created, &updated, &finished, &t.CancelledBy,
		&ap.State, &ap.Question, &ap.Comment, &ap.By, &t.Key, &t.KeyWaiting, &t.Priority, &t.Coalesced)
	if err := sc.Scan(append(dest, more...)...); err != nil {
		return Todo{}, err
	}
	if ap.State != "" {
		t.Approval = &ap
	}
	if t.Trust.Mode == "agent" {
		t.Trust.AddedBy = t.CreatedBy
	}
	if t.State == StateClaimed && !lease.Valid {
		t.Waiting = WaitingApproval
	}
	t.LeaseExpiry = fromNullMS(lease)
	t.FinishedAt = fromNullMS(finished)
	t.AvailableAt, t.CreatedAt, t.UpdatedAt = fromMS(avail), fromMS(created), fromMS(updated)
	return t, nil
}

// Todo loads one todo with its payload.
func (s *Store) Todo(ctx context.Context, id int64) (Todo, error) {
	t, err := s.scanFull(s.queryRow(ctx, `SELECT `+s.fullColumns()+` FROM todos WHERE id = ?`, id))
	if notFound(err) {
		return Todo{}, fmt.Errorf("store: todo %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return Todo{}, fmt.Errorf("store: load todo %d: %w", id, err)
	}
	return t, nil
}

// TodoQueue returns only the queue of a todo, so the edge can check scope before it
// reads anything else.
func (s *Store) TodoQueue(ctx context.Context, id int64) (string, error) {
	var q string
	err := s.queryRow(ctx, `SELECT queue FROM todos WHERE id = ?`, id).Scan(&q)
	if notFound(err) {
		return "", fmt.Errorf("store: todo %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return "", fmt.Errorf("store: load todo %d: %w", id, err)
	}
	return q, nil
}

// TodoFilter selects todos for ListTodos. Results are newest first; pass the last
// row's ID as Before to page.
type TodoFilter struct {
	Queues []string // empty = every queue
	State  string   // empty = every state
	Before int64    // cursor: only ids below this
	Limit  int      // default 50, at most 1000
	// LastError, when set, keeps only todos whose last error is exactly this (the
	// board's dead letters of one cause).
	LastError *string
	// ByFailure lists failed todos (State must be failed) by when they failed,
	// newest first, rather than by id; the cursor is then Before with
	// FailedBefore, the failure time of the todo Before names.
	ByFailure    bool
	FailedBefore time.Time
	// Search keeps only the todos it matches (see TodoSearch).
	Search TodoSearch
}

// ListTodos lists compact todos (no payload), newest first.
func (s *Store) ListTodos(ctx context.Context, f TodoFilter) ([]Todo, error) {
	if s.unmatchable(&f.State, f.LastError, &f.Search.Key, &f.Search.TodoKey, &f.Search.Source, &f.Search.Type,
		&f.Search.Error, &f.Search.Holder) || strings.IndexByte(f.Search.Error, 0) >= 0 {
		// SQLite's LIKE reads its pattern up to a NUL byte only: "\x00" would
		// find every todo.
		return nil, nil
	}
	if queues := slices.DeleteFunc(slices.Clone(f.Queues), func(q string) bool { return s.unmatchable(&q) }); len(queues) < len(f.Queues) {
		if len(queues) == 0 {
			return nil, nil // only queues no todo can be on
		}
		f.Queues = queues
	}
	q, args := todoListQuery(f, s.pg)
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list todos: %w", err)
	}
	out, err := compactTodos(rows)
	if err != nil {
		return nil, fmt.Errorf("store: list todos: %w", err)
	}
	return s.markPaused(ctx, out)
}

// compactTodos reads and closes rows of todoColumns.
func compactTodos(rows *sql.Rows) ([]Todo, error) {
	defer rows.Close()
	var out []Todo
	for rows.Next() {
		t, err := scanTodo(rows, false)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

// todoListQuery builds ListTodos' statement and its arguments, for PostgreSQL
// when pg.
func todoListQuery(f TodoFilter, pg bool) (string, []any) {
	if f.Limit <= 0 {
		f.Limit = 50
	}
	if f.Limit > 1000 {
		f.Limit = 1000
	}
	var where []string
	var args []any
	switch f.State {
	case "":
	case StatePending, StateClaimed, StateDone, StateFailed:
		// Written in, not bound: SQLite picks a partial index by the state's value,
		// so a statement with "state = ?" expires whenever the state is bound
		// again, and modernc binds text anew on every call: it was parsed and
		// planned again each time. A literal gives each state its own prepared
		// statement and the same plans (TestHotStatementsStayPrepared). A LIMIT
		// that differs from the last call's still re-prepares it; callers mostly
		// keep one page size.
		where = append(where, "state = '"+f.State+"'")
	default:
		where = append(where, "state = ?")
		args = append(args, f.State)
	}
	if len(f.Queues) > 0 {
		where = append(where, "queue IN ("+placeholders(len(f.Queues))+")")
		for _, q := range f.Queues {
			args = append(args, q)
		}
	}
	if f.LastError != nil {
		where = append(where, "last_error = ?")
		args = append(args, *f.LastError)
	}
	where, args = f.Search.where(where, args, pg)
	byFailure := f.ByFailure && f.State == StateFailed
	switch {
	case f.Before > 0 && byFailure:
		where = append(where, "(finished_at, id) < (?, ?)")
		args = append(args, ms(f.FailedBefore), f.Before)
	case f.Before > 0:
		where = append(where, "id < ?")
		args = append(args, f.Before)
	}
	q := `SELECT ` + todoColumns + ` FROM todos`
	searchIndex, exact := f.Search.exact()
	switch {
	case f.Search.Key != "":
		q += " NOT INDEXED" // the key's few todos by rowid, whatever else is asked
	case exact && !byFailure:
		// The search's exact term is the short walk; the failure order below
		// walks the dead letters instead, which the Failed tab keeps few.
		q += " INDEXED BY " + searchIndex
	case f.State == StatePending && len(f.Queues) == 1:
		// One queue's pending todos, newest first, are a range of the claim index.
		// Left to itself SQLite walks every pending todo of every queue (by state)
		// or every todo of this one (by queue): a board filtered to a quiet queue
		// beside a deep one read 300,000 rows for each refresh.
		q += " INDEXED BY todos_claimable"
	}
	switch {
	case f.Search.Key != "": // NOT INDEXED, above
	case byFailure && len(f.Queues) == 0:
		// Left to itself SQLite reads every failed todo by state and sorts them.
		q += " INDEXED BY todos_failed_at"
	case byFailure && len(f.Queues) == 1:
		q += " INDEXED BY todos_failed_queue_at"
	}
	if len(where) > 0 {
		q += " WHERE " + strings.Join(where, " AND ")
	}
	if byFailure {
		return q + " ORDER BY finished_at DESC, id DESC LIMIT ?", append(args, f.Limit)
	}
	q += " ORDER BY id DESC LIMIT ?"
	return q, append(args, f.Limit)
}

// QueueCount is the number of todos in one queue and state.
type QueueCount struct {
	Queue string `json:"queue"`
	State string `json:"state"`
	Count int64  `json:"count"`
}

// QueueHead is the todo claim_next takes next on a queue, and since when it has
// been claimable (added, returned, or its retry backoff ended): how long the
// queue's head has waited for an agent.
type QueueHead struct {
	Queue  string    `json:"queue"`
	TodoID int64     `json:"todo_id"`
	Since  time.Time `json:"since"`
}

// pgQueueHeads is QueueHeads on PostgreSQL: each head read as pgHead reads it,
// with no other read of todos (a join, planned while todos was empty, read all of
// it).
const pgQueueHeads = `SELECT c.queue, h.id, h.available_at FROM queue_counts c
		CROSS JOIN LATERAL todos_heads(c.queue, ?, 1) h
		WHERE c.state = 'pending' AND c.n > 0 ORDER BY c.queue`

// QueueHeads returns the head of every queue that has a claimable todo: one
// statement, each queue's head one probe of the claim index, the one claim_next
// makes.
func (s *Store) QueueHeads(ctx context.Context) ([]QueueHead, error) {
	query := `SELECT c.queue, t.id, t.available_at FROM queue_counts c
		JOIN todos t ON t.id = (SELECT id FROM todos INDEXED BY todos_ready
			WHERE state = 'pending' AND key_waiting = 0 AND queue = c.queue AND available_at <= ?
			ORDER BY priority DESC, id LIMIT 1)
		WHERE c.state = 'pending' AND c.n > 0 ORDER BY c.queue`
	if s.pg {
		query = pgQueueHeads
	}
	rows, err := s.query(ctx, query, ms(s.now()))
	if err != nil {
		return nil, fmt.Errorf("store: read the queues' heads: %w", err)
	}
	defer rows.Close()
	var heads []QueueHead
	for rows.Next() {
		var h QueueHead
		var since int64
		if err := rows.Scan(&h.Queue, &h.TodoID, &since); err != nil {
			return nil, fmt.Errorf("store: read the queues' heads: %w", err)
		}
		h.Since = fromMS(since)
		heads = append(heads, h)
	}
	return heads, rows.Err()
}

// QueueCounts counts todos by queue and state.
func (s *Store) QueueCounts(ctx context.Context) ([]QueueCount, error) {
	return s.counts(ctx, `SELECT queue, state, n FROM queue_counts WHERE n > 0 ORDER BY queue, state`)
}

// KeyCounts is QueueCounts for the todos of one key (TodoOptions.Key) alone,
// counted from the todos themselves (through the todos_key index).
func (s *Store) KeyCounts(ctx context.Context, key string) ([]QueueCount, error) {
	return s.counts(ctx, `SELECT queue, state, count(*) FROM todos WHERE key = ? GROUP BY queue, state ORDER BY queue, state`, key)
}

// counts reads rows of (queue, state, count).
func (s *Store) counts(ctx context.Context, query string, args ...any) ([]QueueCount, error) {
	rows, err := s.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("store: count todos: %w", err)
	}
	defer rows.Close()
	var out []QueueCount
	for rows.Next() {
		var c QueueCount
		if err := rows.Scan(&c.Queue, &c.State, &c.Count); err != nil {
			return nil, fmt.Errorf("store: count todos: %w", err)
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

func placeholders(n int) string {
	return strings.TrimSuffix(strings.Repeat("?,", n), ",")
}
