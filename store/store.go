// Package store keeps Switchboard's state in one WAL-mode SQLite file: the todo
// queue, endpoints, humans and the audit log. Every query lives here, written out next
// to the Go that runs it. All writes go through one group-commit writer; reads use a
// separate pool.
//
// The store knows nothing of HTTP or MCP and imports none of the project's packages.
// SQLite-only tricks stay inside this package so another backend can replace it.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/crypto/bcrypt"
	"modernc.org/sqlite" // the pure-Go "sqlite" driver, and its fdatasync switch
)

// Synchronous modes. FULL makes every acknowledged commit survive power loss; NORMAL
// in WAL mode stays consistent after a crash but may lose the last commits on power
// loss, in exchange for fewer fsyncs.
const (
	SyncFull   = "FULL"
	SyncNormal = "NORMAL"
)

// Options configure Open. The zero value is usable.
type Options struct {
	// Synchronous is SyncFull (default) or SyncNormal.
	Synchronous string
	// ReadConns bounds the read pool (default 4).
	ReadConns int
	// MaxBatch bounds how many write requests one group commit carries (default 256).
	MaxBatch int
	// Now is the clock; tests inject a fake one. Default time.Now.
	Now func() time.Time
	// Logger receives store diagnostics. Default slog.Default().
	Logger *slog.Logger
	// ReadOnly opens without migrating and without a writer (for inspection commands).
	ReadOnly bool
	// OlderSchema lets a ReadOnly open take a database that lacks this binary's
	// newest migrations, for what reads it whole as it is (Backup).
	OlderSchema bool
	// MigrateUnservedOnly refuses (ErrInUse) to migrate a database a serve holds
	// (LockForServe): the CLI's, since a serve still running with migrations
	// pending is an older Switchboard, which would not start again on the
	// migrated file.
	MigrateUnservedOnly bool
	// MustExist refuses (fs.ErrNotExist) a database without Switchboard's tables
	// rather than making them: a missing SQLite file, a PostgreSQL schema that
	// was never migrated. The CLI's commands that act on what is there take it,
	// so that a mistyped --db is reported rather than filled.
	MustExist bool
	// SecretKey (32 bytes) seals webhook signing secrets at rest; nil stores them as
	// plaintext. Open refuses a key that does not open the secrets already stored.
	SecretKey []byte
	// PreviousSecretKeys, during a key rotation, still open the secrets they
	// sealed; ReencryptSecrets reseals those with SecretKey.
	PreviousSecretKeys [][]byte
	// AddTodoCap is how many pending todos one agent may have added with
	// add_todo (default MaxAddedPending).
	AddTodoCap int
	// PasswordCost is the bcrypt cost of the password hashes this store makes
	// (default 11). Only tests lower it, to bcrypt.MinCost (4): a check at 11
	// takes a second or more under the race detector.
	PasswordCost int
}

// Store is an open Switchboard database.
type Store struct {
	path string // the SQLite file, or the PostgreSQL URL without its password
	dsn  string // what the driver opens (a PostgreSQL URL keeps its password here only)
	// pgcfg is dsn as pgx read it when the store opened (its libpq keywords, the
	// PG* variables for what it leaves out): every connection the store opens
	// later (the flusher's, the listener's) is made from a Copy of it.
	pgcfg  *pgx.ConnConfig
	pg     bool // on PostgreSQL (see dialect.go)
	opts   Options
	now    func() time.Time
	log    *slog.Logger
	rdb    *sql.DB // read pool, query_only
	wdb    *sql.DB // one connection, owned by the writer goroutine
	writer *writer
	box    *SecretBox // nil: secrets are stored as plaintext

	dummyHash func() []byte // a hash at the store's PasswordCost, made on first use (see checkPassword)

	migrations []string // applied by Open to a database that existed (Migrated)

	rstmts sync.Map // query text → *sql.Stmt on the read pool
	creds  credCache

	deliveryStats deliveryStats // WebhookDeliveryStats' running count

	hooksMu           sync.RWMutex
	hooks             []func(TodoChange)
	own               ownChanges  // this process's adds and returns, while WatchForeign runs
	foreign           []func()    // OnForeignCommit hooks, under hooksMu
	foreignTodos      []func()    // OnForeignTodoCommit hooks, under hooksMu
	foreignTodoNotice atomic.Bool // a notification said another process changed todos (pgwatch.go)
	wakeups           wakeups     // claimable-later changes (see RingDue)

	closeOnce sync.Once
}

// Open opens (creating if needed) the database at path, checks that it is a
// Switchboard database no newer than this binary, applies pending migrations and starts
// the writer. A file that is not a Switchboard database is left untouched.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	pg := IsPostgres(path)
	if err := opts.defaults(path, pg); err != nil {
		return nil, err
	}
	s := &Store{path: path, dsn: path, pg: pg, opts: opts, now: opts.Now, log: opts.Logger}
	// Made on first use, not at start-up, so CLI commands stay fast.
	s.dummyHash = sync.OnceValue(func() []byte {
		h, _ := bcrypt.GenerateFromPassword([]byte("switchboard-timing-equaliser"), opts.PasswordCost)
		return h
	})
	if err := CheckDB(path); err != nil {
		return nil, err
	}
	if pg {
		s.path = Redacted(path)
	} else {
		if _, err := os.Stat(path); opts.MustExist && errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("store: no database at %s: %w", path, fs.ErrNotExist)
		}
		if err := prepareFile(ctx, path, opts.ReadOnly); err != nil {
			return nil, err
		}
		syncWithFdatasync()
	}
	var err error
	if opts.SecretKey == nil && len(opts.PreviousSecretKeys) > 0 {
		return nil, fmt.Errorf("store: a previous secret key needs a current one to reseal with: %w", ErrSecretKey)
	}
	if opts.SecretKey != nil {
		if s.box, err = NewSecretBox(opts.SecretKey, opts.PreviousSecretKeys...); err != nil {
			return nil, err
		}
	}
	if err := s.openDBs(ctx); err != nil {
		return nil, err
	}
	if s.box != nil {
		if err := s.CheckSecrets(ctx); err != nil {
			s.closeDBs()
			return nil, err
		}
	}
	if opts.ReadOnly {
		return s, nil
	}
	s.writer, err = newWriter(ctx, s)
	if err != nil {
		s.closeDBs()
		return nil, err
	}
	if s.box != nil {
		if err := s.markKeyed(ctx); err != nil {
			s.Close()
			return nil, err
		}
		if err := s.write(ctx, func(w *wtx) error { _, err := w.sealSettingSecrets(s.box); return err }); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// defaults fills in the options left unset and refuses the ones, and a path, that
// cannot work.
func (o *Options) defaults(path string, pg bool) error {
	if o.Synchronous == "" {
		o.Synchronous = SyncFull
	}
	o.Synchronous = strings.ToUpper(o.Synchronous)
	if o.Synchronous != SyncFull && o.Synchronous != SyncNormal {
		return fmt.Errorf("store: synchronous must be FULL or NORMAL, not %q", o.Synchronous)
	}
	if o.ReadConns <= 0 {
		o.ReadConns = 4
	}
	if o.MaxBatch <= 0 {
		o.MaxBatch = 256
	}
	if o.PasswordCost == 0 {
		o.PasswordCost = bcryptCost
	}
	if o.PasswordCost < bcrypt.MinCost || o.PasswordCost > bcrypt.MaxCost {
		return fmt.Errorf("store: password cost %d is outside bcrypt's %d-%d", o.PasswordCost, bcrypt.MinCost, bcrypt.MaxCost)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if path == "" {
		return errors.New("store: database path is empty")
	}
	if !pg && strings.ContainsAny(path, "?#") {
		return fmt.Errorf("store: database path %q must not contain '?' or '#'", path)
	}
	return nil
}

// prepareFile refuses a file that is not a Switchboard database (or is a newer
// one) before anything writes to it, and creates a new database file private to
// its owner.
func prepareFile(ctx context.Context, path string, readOnly bool) error {
	// Look before we touch: setting WAL mode rewrites the header of whatever file is
	// there, so a foreign or newer file is refused from a read-only peek first.
	if err := preflight(ctx, path); err != nil {
		return err
	}
	if readOnly {
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("store: open %s: %w", path, err)
		}
	} else if f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		// A new database is readable by its owner alone, whatever the umask: it
		// holds ingest tokens, and webhook secrets sealed only when a key is set.
		// SQLite gives its -wal and -shm the database file's mode.
		f.Close()
	} else if !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("store: create %s: %w", path, err)
	}
	return nil
}

// openDBs opens the one-connection write pool (and migrates through it) and the
// read pool, and checks a read-only store's schema. On an error nothing is left
// open.
func (s *Store) openDBs(ctx context.Context) error {
	if s.pg {
		return s.openPostgres(ctx)
	}
	path, opts := s.path, s.opts
	var err error
	if !opts.ReadOnly {
		s.wdb, err = sql.Open("sqlite", dsn(path, opts, false))
		if err != nil {
			return fmt.Errorf("store: open %s: %w", path, err)
		}
		s.wdb.SetMaxOpenConns(1)
		s.wdb.SetMaxIdleConns(1)
		s.wdb.SetConnMaxLifetime(0)
		s.wdb.SetConnMaxIdleTime(0)
		if err := s.migrate(ctx); err != nil {
			s.wdb.Close()
			return err
		}
	}
	s.rdb, err = sql.Open("sqlite", dsn(path, opts, true))
	if err != nil {
		s.closeDBs()
		return fmt.Errorf("store: open %s for reading: %w", path, err)
	}
	s.rdb.SetMaxOpenConns(opts.ReadConns)
	s.rdb.SetMaxIdleConns(opts.ReadConns)
	if err := s.rdb.PingContext(ctx); err != nil {
		s.closeDBs()
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	if opts.ReadOnly {
		check := s.checkSchema
		if opts.OlderSchema {
			check = func(ctx context.Context) error { return checkVersion(ctx, s.rdb, s.path, false) }
		}
		if err := check(ctx); err != nil {
			s.closeDBs()
			return err
		}
	}
	return nil
}

// syncWithFdatasync makes SQLite commit with fdatasync(2), as every Linux
// distribution's SQLite does: the WAL's data and size reach the disk exactly as
// with fsync, but a commit does not wait for the journal to record the file's new
// mtime. modernc's transpile defaults to fsync; where fdatasync does not exist
// (macOS) fsync stays. The switch is process-wide; every way in (Open,
// MeasureFloor) sets it, so the floor is measured with the same syncs.
func syncWithFdatasync() { sqlite.Fdatasync(true) }

// dsn builds a modernc.org/sqlite DSN. Pragmas go in the DSN, not in db.Exec, so
// that every pooled connection gets them, including ones opened later.
func dsn(path string, opts Options, readOnly bool) string {
	q := url.Values{}
	// Wait for a lock instead of failing at once: a foreign process (the CLI adding a
	// todo while serve runs) may hold the write lock for a moment.
	q.Add("_pragma", "busy_timeout(5000)")
	// Endpoints reference humans, events reference webhooks: keep them honest.
	q.Add("_pragma", "foreign_keys(1)")
	if readOnly {
		// The read pool must never write, even by mistake.
		q.Add("_pragma", "query_only(1)")
	} else {
		// WAL lets readers proceed while the writer commits; it persists in the file.
		// The writer walks the claim, lease and listing indexes of a deep queue;
		// 16 MB of page cache keeps their hot pages in memory at a million todos
		// (SQLite's default 2 MB does not). Readers keep the default.
		q.Add("_pragma", "cache_size(-16000)")
		// Each request in a group commit runs under a savepoint, and SQLite keeps a
		// savepoint's undo pages in a sub-journal: a temp file by default, so every
		// first touch of a page cost a pwrite. In memory it costs a memcpy; the
		// sub-journal lives only as long as one batch.
		q.Add("_pragma", "temp_store(MEMORY)")
		q.Add("_pragma", "journal_mode(WAL)")
		// A reader that holds one snapshot for long (a backup to a slow disk) keeps
		// checkpoints from going past it, and the WAL grows meanwhile; SQLite never
		// shrinks the file by itself. Past 16 MB (four times what the
		// autocheckpoint lets it reach otherwise) it is cut back once reset.
		q.Add("_pragma", "journal_size_limit(16777216)")
		// FULL: an acknowledged commit is fsynced (see SyncFull/SyncNormal).
		q.Add("_pragma", "synchronous("+opts.Synchronous+")")
		// Writers take the lock at BEGIN so a transaction never fails half-way
		// with SQLITE_BUSY when upgrading from a read lock.
		q.Set("_txlock", "immediate")
	}
	return path + "?" + q.Encode()
}

// Path is the database file's path, or on PostgreSQL its URL with the password
// masked: a name to show, never a credential.
func (s *Store) Path() string { return s.path }

// OnPostgres reports whether the store is on PostgreSQL rather than a SQLite file.
func (s *Store) OnPostgres() bool { return s.pg }

// Now is the store's clock.
func (s *Store) Now() time.Time { return s.now() }

// Ping checks that the database answers a query, and that the writer still writes.
// A PostgreSQL server that cannot be reached is ErrUnreachable: restarting serve
// does not bring it back, and serve recovers by itself once it is.
func (s *Store) Ping(ctx context.Context) error {
	if s.writer != nil {
		if err := s.writer.brokenErr(); err != nil {
			return err
		}
	}
	if s.pg {
		return s.pgPing(ctx)
	}
	var one int
	if err := s.queryRow(ctx, `SELECT 1`).Scan(&one); err != nil {
		return fmt.Errorf("store: ping: %w", err)
	}
	return nil
}

// pgPing is Ping's question to PostgreSQL, on a read connection of its own.
// The server is unreachable (ErrUnreachable, which a restart of this process
// would not mend) when no connection can be made to it, or when one it holds
// does not answer in the time given (its host frozen, the network cut); but
// every read connection busy in this process is this process's trouble.
func (s *Store) pgPing(ctx context.Context) error {
	ask := func() error {
		asked := time.Now()
		conn, err := s.rdb.Conn(ctx)
		switch {
		case err != nil && connectFailed(err):
			return s.unreachable(err)
		case err != nil:
			return fmt.Errorf("store: ping: no read connection to ask on: %w", err)
		}
		defer conn.Close()
		// A connection that came late, from a busy pool, leaves the server too
		// little of the time to be blamed for running out of it.
		deadline, bounded := ctx.Deadline()
		late := bounded && time.Until(deadline) < time.Since(asked)
		var one int
		// Not a prepared statement: none can be prepared while the server is away.
		err = conn.QueryRowContext(ctx, `SELECT 1`).Scan(&one)
		switch {
		case err != nil && ctx.Err() != nil && late:
			return fmt.Errorf("store: ping: the read connections were busy: %w", err)
		case err != nil && ctx.Err() != nil:
			return fmt.Errorf("store: PostgreSQL at %s did not answer in time: %w", pgWhere(s.pgcfg), ErrUnreachable)
		case err != nil:
			return fmt.Errorf("store: ping: %w", err)
		}
		return nil
	}
	err := ask()
	if err != nil && ctx.Err() == nil {
		// The pool may have handed out a connection the server closed when it
		// restarted: the server itself is asked again, on a new one.
		s.dropIdleReads()
		err = ask()
	}
	return err
}

// Close stops the writer after it has finished the writes it accepted, then closes
// the database.
func (s *Store) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.writer != nil {
			s.writer.close()
		}
		s.stopWakeups()
		s.rstmts.Range(func(_, v any) bool { v.(*sql.Stmt).Close(); return true })
		err = s.closeDBs()
	})
	return err
}

func (s *Store) closeDBs() error {
	var errs []error
	if s.rdb != nil {
		errs = append(errs, s.rdb.Close())
	}
	if s.wdb != nil {
		errs = append(errs, s.wdb.Close())
	}
	return errors.Join(errs...)
}

// rstmt returns a prepared statement on the read pool, preparing it once per query
// text; database/sql re-prepares it lazily on each pooled connection.
func (s *Store) rstmt(ctx context.Context, query string) *sql.Stmt {
	if st, ok := s.rstmts.Load(query); ok {
		return st.(*sql.Stmt)
	}
	st, err := s.rdb.PrepareContext(ctx, s.q(query))
	if err != nil {
		// Surface the error at execution time through an unprepared path.
		return nil
	}
	if prev, loaded := s.rstmts.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt)
	}
	return st
}

// queryRow runs a read query on the pool.
func (s *Store) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	args = s.readArgs(args)
	if st := s.rstmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return s.rdb.QueryRowContext(ctx, s.q(query), args...)
}

// query runs a read query on the pool.
func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	args = s.readArgs(args)
	if st := s.rstmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return s.rdb.QueryContext(ctx, s.q(query), args...)
}

// readArgs are a read's arguments as PostgreSQL can compare them: a text it
// could not hold (a NUL byte, bytes that are not UTF-8: a login's username, a
// path's token) is looked up as it would have been stored (pgText), not
// refused with an error. The caller's slice is left as it was.
func (s *Store) readArgs(args []any) []any {
	if !s.pg || !slices.ContainsFunc(args, func(a any) bool { t, ok := a.(string); return ok && !storable(t) }) {
		return args
	}
	args = slices.Clone(args)
	pgText(args)
	return args
}

// ms converts a time to the Unix milliseconds stored in every time column.
func ms(t time.Time) int64 { return t.UnixMilli() }

// fromMS converts stored Unix milliseconds back to a time.
func fromMS(v int64) time.Time { return time.UnixMilli(v).UTC() }

// fromNullMS converts a nullable time column.
func fromNullMS(v sql.NullInt64) *time.Time {
	if !v.Valid {
		return nil
	}
	t := fromMS(v.Int64)
	return &t
}
