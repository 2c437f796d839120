package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/switchboardhq/switchboard/internal/mcpclient/bridge"
)

const connectSynopsis = `connect --url URL [--credential-env VAR]   (stdio ⇄ Streamable HTTP bridge)`

// runConnect relays an MCP client that only launches stdio servers to a running
// Switchboard, doorbell notifications included. The credential comes from an
// environment variable, never argv, where ps and shell history would show it.
func runConnect(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "connect", connectSynopsis)
	url := fs.String("url", envOr(env, "SWITCHBOARD_URL", ""), "Switchboard's MCP URL, e.g. https://sb.example.net/mcp (env SWITCHBOARD_URL)")
	credEnv := fs.String("credential-env", "SWITCHBOARD_CREDENTIAL", "environment variable holding the endpoint credential")
	verbose := fs.Bool("verbose", false, "log the bridge's diagnostics to stderr")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *url == "" {
		return usageErr("--url is required")
	}
	if fs.NArg() > 0 {
		return usageErr("unexpected argument %q (the credential is read from $%s, never argv)", fs.Arg(0), *credEnv)
	}
	cred := env.getenv(*credEnv)
	if cred == "" {
		return usageErr("$%s is not set: put the endpoint credential there", *credEnv)
	}
	level := slog.LevelWarn
	if *verbose {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: level}))
	err := bridge.Run(ctx, *url, cred, env.stdin, env.stdout, logger)
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, io.EOF):
		return nil
	case errors.Is(err, bridge.ErrUnauthorized):
		return fmt.Errorf("%s refused the credential in $%s (revoked or mistyped?)", *url, *credEnv)
	}
	return err
}
