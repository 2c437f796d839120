// Package cli is switchboard's command line: one file per command, each
// subcommand one small function, the flags and usage of each written once (see
// Commands and Lookup). The packages do the work; a command parses, opens what it
// needs, hands over and prints. It must not exit the process: Main returns the
// exit code to main.
package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sort"
	"strings"
	"syscall"

	"github.com/switchboardhq/switchboard/store"
)

// errUsage marks a command-line mistake: usage is printed and the exit code is 2.
var errUsage = errors.New("usage")

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, env *environ, args []string) error
}

// environ is what a command sees of the world, so tests can run commands in-process.
type environ struct {
	stdin  io.Reader
	stdout io.Writer
	stderr io.Writer
	getenv func(string) string
	// arg0 is the program as it was started (os.Args[0]), for the commands the
	// program suggests; "" reads as switchboard (see invokedAs).
	arg0 string
	// lookup, when set, stops the command once its flags have parsed (Lookup).
	lookup *lookup
	// version and commit are the build's (main's, stamped by -ldflags); an
	// empty version reads as dev (see buildVersion).
	version, commit string
}

// buildVersion is the release this build is, or dev for one built without.
func (env *environ) buildVersion() string {
	if env.version == "" {
		return "dev"
	}
	return env.version
}

func commands() []command {
	return []command{
		{"serve", "run the server (HTTP, MCP, webhooks, reaper, modules)", runServe},
		{"endpoint", "create, list, update or revoke agent endpoints", runEndpoint},
		{"operator", "create, list and log out board operators, or reset a password (on stdin)", runOperator},
		{"admin", "the operator command's old name, kept for scripts", runAdmin},
		{"todo", "add, list, show, release, retry or cancel todos", runTodo},
		{"queue", "list queues, pause or resume one", runQueue},
		{"webhook", "create, list, rotate or delete webhooks (ingest URLs)", runWebhook},
		{"secrets", "encrypt stored webhook secrets with the configured key", runSecrets},
		{"modules", "list capability modules or approve a changed tool definition", runModules},
		{"backup", "write a consistent copy of the SQLite database (safe while serve runs; PostgreSQL: pg_dump)", runBackup},
		{"restore", "replace the SQLite database with a backup (stop serve first; PostgreSQL: pg_restore, or a SQLite database copied in)", runRestore},
		{"connect", "bridge a stdio-only MCP client to a running Switchboard", runConnect},
		{"bench", "measure ingest, drain and doorbell capacity on this machine", runBench},
		{"version", "print version, commit and Go version", runVersion},
	}
}

// Main runs the command os.Args names, on the process's standard streams and
// environment, until it ends or SIGINT or SIGTERM ends it, and returns the exit
// code: 0 done, 1 failed, 2 a command-line mistake. version and commit are the
// build's.
func Main(version, commit string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	env := &environ{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, arg0: os.Args[0],
		version: version, commit: commit}
	return run(ctx, env, os.Args[1:])
}

// run dispatches args to a subcommand and returns the process exit code.
func run(ctx context.Context, env *environ, args []string) int {
	if len(args) == 0 {
		usage(env.stderr)
		return 2
	}
	if isHelp(args[0]) {
		usage(env.stdout)
		return 0
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(ctx, env, args[1:])
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.Is(err, errUsage):
			if msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": "); msg != errUsage.Error() {
				fmt.Fprintf(env.stderr, "switchboard %s: %s\n", c.name, msg)
			}
			return 2
		default:
			fmt.Fprintf(env.stderr, "switchboard %s: %s\n", c.name, cliMessage(c.name, err))
			return 1
		}
	}
	fmt.Fprintf(env.stderr, "switchboard: unknown command %q\n\n", args[0])
	usage(env.stderr)
	return 2
}

// cliMessage is err as a person reads it after "switchboard <command>: ": the
// store's reason (store.Reason), without the sentinel's text after a reason that
// already says what is wrong, and without the operation's name where it is the
// command's own (the store's backup and restore errors begin "backup:" and
// "restore:").
func cliMessage(command string, err error) string {
	msg := store.Reason(err, store.ErrInvalid, store.ErrConflict, fs.ErrNotExist)
	if command != "" {
		msg = strings.TrimPrefix(msg, command+": ")
	}
	return msg
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: switchboard <command> [flags]")
	fmt.Fprintln(w, "\ncommands:")
	cs := commands()
	sort.Slice(cs, func(i, j int) bool { return cs[i].name < cs[j].name })
	for _, c := range cs {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'switchboard <command> -h' for a command's flags.")
}

// isHelp reports whether arg asks for help where a subcommand or an ID is
// expected, so that `switchboard todo -h` and `switchboard webhook rotate -h`
// print their usage and exit 0 like every flag set's -h does.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--h", "--help", "help":
		return true
	}
	return false
}

// usageErr wraps a message as a command-line mistake.
func usageErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", errUsage, fmt.Sprintf(format, a...))
}

// newFlags returns a flag set that reports mistakes as errUsage. Its usage goes
// to stdout when asked for (-h), so that it pages and greps, and to stderr after
// a mistake (see flagOutput).
func newFlags(env *environ, name, synopsis string) *flag.FlagSet {
	fs := flag.NewFlagSet("switchboard "+name, flag.ContinueOnError)
	fs.SetOutput(&flagOutput{stdout: env.stdout, stderr: env.stderr, lookup: env.lookup})
	if env.lookup != nil {
		env.lookup.fs = fs
	}
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: switchboard %s\n\nflags:\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// flagOutput holds what a flag set writes while it parses, until it is known
// whether that was help asked for (stdout) or a mistake (stderr).
type flagOutput struct {
	stdout, stderr io.Writer
	held           bytes.Buffer
	lookup         *lookup // set under Lookup: parsing is all there is to do
}

func (o *flagOutput) Write(p []byte) (int, error) { return o.held.Write(p) }

// flush writes out what fs held: to stdout for help, else to stderr.
func flush(fs *flag.FlagSet, help bool) {
	o, ok := fs.Output().(*flagOutput)
	if !ok || o.held.Len() == 0 {
		return
	}
	w := o.stderr
	if help {
		w = o.stdout
	}
	w.Write(o.held.Bytes())
	o.held.Reset()
}

// parse parses flags; a mistake becomes errUsage (flag already printed why and usage).
func parse(fs *flag.FlagSet, args []string) error {
	if err := parseOnly(fs, args); err != nil {
		return err
	}
	return lookedUp(fs)
}

func parseOnly(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	flush(fs, errors.Is(err, flag.ErrHelp))
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	return nil
}

// parseFlags parses a command that takes flags only: a positional argument is a
// usage error.
func parseFlags(fs *flag.FlagSet, args []string) error {
	if err := parseOnly(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q", fs.Arg(0))
	}
	return lookedUp(fs)
}

// envOr is the flag default: the SWITCHBOARD_* variable when set, else def.
func envOr(env *environ, name, def string) string {
	if v := env.getenv(name); v != "" {
		return v
	}
	return def
}

// defaultDB is $STATE_DIRECTORY/switchboard.db under systemd, else ./switchboard.db.
func defaultDB(env *environ) string {
	if v := env.getenv("SWITCHBOARD_DB"); v != "" {
		return v
	}
	if dir := env.getenv("STATE_DIRECTORY"); dir != "" {
		// systemd may pass several directories separated by ':'; the first is ours.
		dir, _, _ = strings.Cut(dir, ":")
		return filepath.Join(dir, "switchboard.db")
	}
	return "switchboard.db"
}

// dbUsage is --db's help, the same on every command.
const dbUsage = "SQLite database file, or a postgres:// URL (env SWITCHBOARD_DB)"

// dbFlag adds --db to a flag set.
func dbFlag(fs *flag.FlagSet, env *environ) *string {
	db := fs.String("db", defaultDB(env), dbUsage)
	hideDBPassword(fs)
	return db
}

// hideDBPassword has fs's usage show --db's default (SWITCHBOARD_DB) as the
// server it names, never the value itself: it may hold a password, and -h or
// a mistyped flag prints the defaults.
func hideDBPassword(fs *flag.FlagSet) {
	if f := fs.Lookup("db"); f != nil { // a SQLite path stays as it is
		f.DefValue = store.Redacted(f.DefValue)
	}
}

func runVersion(_ context.Context, env *environ, args []string) error {
	fs := newFlags(env, "version", "version")
	if err := parse(fs, args); err != nil {
		return err
	}
	c := env.commit
	if c == "" {
		if bi, ok := debug.ReadBuildInfo(); ok {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					c = s.Value
				}
			}
		}
	}
	if c == "" {
		c = "unknown"
	}
	fmt.Fprintf(env.stdout, "switchboard %s (commit %s, %s, %s/%s)\n", env.buildVersion(), c, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
