package cli

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/switchboardhq/switchboard/store"
)

// subcommand is one verb of a command group, such as `endpoint create`.
type subcommand struct {
	name string
	run  func(ctx context.Context, env *environ, args []string) error
}

// dispatch runs the subcommand args[0] names. A missing or unknown one prints the
// group's synopsis and is a usage mistake that lists subs in the order given.
func dispatch(ctx context.Context, env *environ, args []string, synopsis string, subs ...subcommand) error {
	if len(args) > 0 {
		for _, s := range subs {
			if s.name == args[0] {
				return s.run(ctx, env, args[1:])
			}
		}
	}
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintf(env.stdout, "usage: switchboard %s\n", synopsis)
		return flag.ErrHelp
	}
	fmt.Fprintf(env.stderr, "usage: switchboard %s\n", synopsis)
	if len(args) == 0 {
		names := make([]string, len(subs))
		for i, s := range subs {
			names[i] = s.name
		}
		return usageErr("missing subcommand (%s)", strings.Join(names, ", "))
	}
	return usageErr("unknown subcommand %q", args[0])
}

// leadingID reads the ID argument that comes before a subcommand's flags, as in
// `endpoint update 7 --queues q`; what names the thing it identifies. `-h` in its
// place prints the subcommand's usage.
func leadingID(fs *flag.FlagSet, what string, args []string) (int64, []string, error) {
	if len(args) > 0 && isHelp(args[0]) {
		fs.Usage()
		flush(fs, true)
		return 0, nil, flag.ErrHelp
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") && !isNumber(args[0][1:]) {
		return 0, nil, usageErr("missing %s ID", what)
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, nil, usageErr("%s ID must be a positive number, not %q", what, args[0])
	}
	return id, args[1:], nil
}

// onID runs a subcommand that acts on one stored thing by its leading ID, as in
// `endpoint revoke 7`: parse, open the store, act. The thing must already be
// stored, so a mistyped --db is reported rather than created.
func onID(ctx context.Context, env *environ, args []string, name, synopsis, what string,
	act func(ctx context.Context, s *store.Store, id int64) error) error {
	fs := newFlags(env, name, synopsis)
	db := dbFlag(fs, env)
	id, rest, err := leadingID(fs, what, args)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	s, err := openExisting(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	return act(ctx, s, id)
}

// isNumber reports whether s is digits, as -1 is a number given for an ID, not a flag.
func isNumber(s string) bool {
	_, err := strconv.ParseUint(s, 10, 64)
	return err == nil
}
