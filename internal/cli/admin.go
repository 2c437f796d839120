package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// openStore opens the database for a CLI command, creating and migrating it if needed.
// A CLI command migrates a database it writes to only while no serve runs on it
// (a serve still running with migrations pending is an older Switchboard, which
// would not start again on the migrated file), and says when it has.
func openStore(ctx context.Context, env *environ, path string) (*store.Store, error) {
	return openStoreWith(ctx, env, path, store.Options{})
}

// openStoreWith opens the database for writing, with opts (a secret key, say).
func openStoreWith(ctx context.Context, env *environ, path string, opts store.Options) (*store.Store, error) {
	opts.Synchronous = envOr(env, "SWITCHBOARD_SYNCHRONOUS", store.SyncFull)
	opts.Logger = slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	opts.MigrateUnservedOnly = true
	st, err := store.Open(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	if m := st.Migrated(); len(m) > 0 {
		fmt.Fprintf(env.stderr, "migrated %s to this Switchboard's schema (%s): older Switchboards no longer open it\n",
			absPath(st.Path()), strings.Join(m, ", "))
	}
	return st, nil
}

// openStoreRO opens an existing database for reading only.
func openStoreRO(ctx context.Context, env *environ, path string) (*store.Store, error) {
	return openStoreROWith(ctx, env, path, store.Options{})
}

// openStoreROWith opens an existing database for reading only, with opts.
func openStoreROWith(ctx context.Context, env *environ, path string, opts store.Options) (*store.Store, error) {
	if err := requireDatabase(path); err != nil {
		return nil, err
	}
	opts.ReadOnly = true
	opts.Logger = slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return store.Open(ctx, path, opts)
}

// requireDatabase is noDatabase when nothing is at path, for commands that must
// not create the database.
func requireDatabase(path string) error {
	if err := store.CheckDB(path); err != nil {
		return err
	}
	if store.IsPostgres(path) {
		return nil // a schema without Switchboard's tables is the store's to say (Options.MustExist)
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return noDatabase(path)
	}
	return nil
}

// noDatabase says where the command looked, and how to point it at the database: a
// CLI run outside the service does not see systemd's STATE_DIRECTORY.
// It wraps fs.ErrNotExist, so callers that fall back when there is no database
// (modules list) still can.
func noDatabase(path string) error {
	return fmt.Errorf("no database at %s: name it with --db or SWITCHBOARD_DB "+
		"(the packaged service keeps it in /var/lib/switchboard/switchboard.db): %w", absPath(path), fs.ErrNotExist)
}

// absPath is path made absolute, or path itself if that fails: what a message
// about a file names, so a relative --db shows where it resolved. A PostgreSQL
// URL is shown with its password masked.
func absPath(path string) string {
	if store.IsPostgres(path) {
		return store.Redacted(path)
	}
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

// operatorSynopsis is the usage of the operator command; CMD is the name it was
// called by.
const operatorSynopsis = `CMD create --username NAME [--db FILE]   (password read from stdin)
       switchboard CMD passwd --username NAME [--db FILE]   (new password read from stdin; logs NAME out everywhere)
       switchboard CMD logout --username NAME [--db FILE]   (ends every session of NAME)
       switchboard CMD list [--json] [--db FILE]`

// operatorCmd is the operator command as called: `operator`, or `admin`, its
// old name, which scripts call and whose usage and messages say admin as they did.
type operatorCmd struct {
	name, synopsis string
}

func runOperator(ctx context.Context, env *environ, args []string) error {
	return operatorCommand("operator").run(ctx, env, args)
}

func runAdmin(ctx context.Context, env *environ, args []string) error {
	return operatorCommand("admin").run(ctx, env, args)
}

func operatorCommand(name string) operatorCmd {
	return operatorCmd{name: name, synopsis: strings.ReplaceAll(operatorSynopsis, "CMD", name)}
}

func (o operatorCmd) run(ctx context.Context, env *environ, args []string) error {
	return dispatch(ctx, env, args, o.synopsis, subcommand{"create", o.create},
		subcommand{"passwd", o.passwd}, subcommand{"logout", o.logout}, subcommand{"list", o.list})
}

// passwd sets an operator's password (from stdin) and ends their sessions: the
// way back in for one who forgot it, and the way to shut out one whose password or
// session leaked.
func (o operatorCmd) passwd(ctx context.Context, env *environ, args []string) error {
	db, username, err := o.flags(env, "passwd", args)
	if err != nil {
		return err
	}
	pw, err := readPassword(ctx, env)
	if err != nil {
		return err
	}
	s, err := openExisting(ctx, env, db)
	if err != nil {
		return err
	}
	defer s.Close()
	h, ended, err := s.SetPassword(ctx, username, pw, "human:cli")
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "password of operator %q changed; sessions ended: %d\n", h.Username, ended)
	return nil
}

// logout ends every session an operator has, on every browser.
func (o operatorCmd) logout(ctx context.Context, env *environ, args []string) error {
	db, username, err := o.flags(env, "logout", args)
	if err != nil {
		return err
	}
	s, err := openExisting(ctx, env, db)
	if err != nil {
		return err
	}
	defer s.Close()
	h, ended, err := s.EndSessions(ctx, username, "human:cli")
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "operator %q logged out everywhere; sessions ended: %d (an open board goes to the "+
		"login page at its next request, or within 30 s)\n", h.Username, ended)
	return nil
}

// flags parses the flags of a subcommand on one operator: --db and --username.
func (o operatorCmd) flags(env *environ, sub string, args []string) (db, username string, err error) {
	fs := newFlags(env, o.name+" "+sub, o.synopsis)
	dbPath := dbFlag(fs, env)
	user := fs.String("username", "", "operator's username (required)")
	if err := parseFlags(fs, args); err != nil {
		return "", "", err
	}
	if *user == "" {
		return "", "", usageErr("--username is required")
	}
	return *dbPath, *user, nil
}

// list lists the operators and their live sessions.
func (o operatorCmd) list(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, o.name+" list", o.synopsis)
	db := dbFlag(fs, env)
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, err := openStoreRO(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	ops, err := s.ListOperators(ctx)
	if err != nil {
		return err
	}
	return printList(env, *asJSON, ops, table[store.OperatorSummary]{header: "ID\tUSERNAME\tCREATED\tSESSIONS\tLAST LOGIN",
		row: func(o store.OperatorSummary) string {
			last := "-"
			if o.LastLogin != nil {
				last = o.LastLogin.Local().Format(time.DateTime)
			}
			return fmt.Sprintf("%d\t%s\t%s\t%d\t%s", o.ID, o.Username, o.CreatedAt.Local().Format(time.DateTime), o.Sessions, last)
		}})
}

// openExisting opens the database for a command that changes what must already be
// there: a mistyped --db is reported, not created.
func openExisting(ctx context.Context, env *environ, path string) (*store.Store, error) {
	return openExistingWith(ctx, env, path, store.Options{})
}

// openExistingWith is openExisting with opts: on SQLite the file must be there,
// on PostgreSQL the schema must hold Switchboard's tables, so that a mistyped
// --db is reported rather than made.
func openExistingWith(ctx context.Context, env *environ, path string, opts store.Options) (*store.Store, error) {
	if err := requireDatabase(path); err != nil {
		return nil, err
	}
	opts.MustExist = true
	return openStoreWith(ctx, env, path, opts)
}

func (o operatorCmd) create(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, o.name+" create", o.synopsis)
	db := dbFlag(fs, env)
	username := fs.String("username", "", "operator's username (required)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *username == "" {
		return usageErr("--username is required")
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q (the password is read from stdin, never argv)", fs.Arg(0))
	}
	// The password comes from stdin so it never shows in ps or shell history:
	// `switchboard operator create --username ana < pwfile`, or typed at the prompt.
	pw, err := readPassword(ctx, env)
	if err != nil {
		return err
	}
	s, err := openStore(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	h, err := s.CreateOperator(ctx, *username, pw, "human:cli")
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "operator %q created (id %d)\n", h.Username, h.ID)
	return nil
}
