package cli

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// lookup is what Lookup hears of the command it parses for.
type lookup struct {
	fs *flag.FlagSet // the last flag set the command made: its own
}

// errLookedUp stops a command under Lookup once its flags have parsed.
var errLookedUp = errors.New("looked up")

// lookedUp is nil, or errLookedUp when fs was made for Lookup.
func lookedUp(fs *flag.FlagSet) error {
	if o, ok := fs.Output().(*flagOutput); ok && o.lookup != nil {
		return errLookedUp
	}
	return nil
}

// Lookup parses args as `switchboard args…` would, without running the command,
// and returns the flag set of the command or subcommand they name (say
// []string{"serve"}, or {"todo", "list", "--queue", "inbox"}), with args' flags
// set on it. Its error says what `switchboard` would say of a line it refuses:
// an unknown command or subcommand, a missing or malformed leading ID, an
// unknown flag or a bad value. What a command checks after parsing (a required
// flag, positional arguments beyond the flags) is not checked; -h is an error
// (flag.ErrHelp). Flag defaults are those of an empty environment.
//
// It is for tests and docs checks: each flag the docs name must be on its
// command's flag set (fs.Lookup(name) != nil), and each command line they show
// must parse.
func Lookup(args []string) (*flag.FlagSet, error) {
	var stderr bytes.Buffer
	env := &environ{stdin: strings.NewReader(""), stdout: io.Discard, stderr: &stderr,
		getenv: func(string) string { return "" }, lookup: &lookup{}}
	if len(args) == 0 {
		return nil, errors.New("no command")
	}
	for _, c := range commands() {
		if c.name != args[0] {
			continue
		}
		err := c.run(context.Background(), env, args[1:])
		switch {
		case errors.Is(err, errLookedUp):
			return env.lookup.fs, nil
		case err == nil:
			return nil, fmt.Errorf("switchboard %s: parses no flags", c.name)
		case errors.Is(err, errUsage):
			// A flag's own mistake is said on stderr, above the usage.
			msg := strings.TrimPrefix(err.Error(), errUsage.Error()+": ")
			if msg == errUsage.Error() {
				msg, _, _ = strings.Cut(strings.TrimSpace(stderr.String()), "\n")
			}
			return nil, fmt.Errorf("switchboard %s: %s", c.name, msg)
		}
		return nil, fmt.Errorf("switchboard %s: %w", c.name, err)
	}
	return nil, fmt.Errorf("switchboard: unknown command %q", args[0])
}
