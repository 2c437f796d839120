package main

import (
	"context"
	"fmt"
	"strings"
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
