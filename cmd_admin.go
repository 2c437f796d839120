package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/switchboardhq/switchboard/store"
)

// openStore opens the database for a CLI command, creating and migrating it if needed.
func openStore(ctx context.Context, env *environ, path string) (*store.Store, error) {
	return store.Open(ctx, path, store.Options{
		Synchronous: envOr(env, "SWITCHBOARD_SYNCHRONOUS", store.SyncFull),
		Logger:      slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
}

// openStoreRO opens an existing database for reading only.
func openStoreRO(ctx context.Context, env *environ, path string) (*store.Store, error) {
	if err := requireDatabase(path); err != nil {
		return nil, err
	}
	return store.Open(ctx, path, store.Options{
		ReadOnly: true,
		Logger:   slog.New(slog.NewTextHandler(env.stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
}

// requireDatabase is noDatabase when nothing is at path, for commands that must
// not create the database.
func requireDatabase(path string) error {
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
// about a file names, so a relative --db shows where it resolved.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}

const adminSynopsis = `admin create --username NAME [--db FILE]   (password read from stdin)`

func runAdmin(ctx context.Context, env *environ, args []string) error {
	return dispatch(ctx, env, args, adminSynopsis, subcommand{"create", adminCreate})
}

func adminCreate(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "admin create", adminSynopsis)
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
	// `switchboard admin create --username ana < pwfile`, or typed then Ctrl-D.
	pw, err := readPassword(env.stdin)
	if err != nil {
		return err
	}
	s, err := openStore(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	h, err := s.CreateHuman(ctx, *username, pw, "human:cli")
	if err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "operator %q created (id %d)\n", h.Username, h.ID)
	return nil
}

// readPassword reads the first line of r as the password.
func readPassword(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read password from stdin: %w", err)
	}
	pw := strings.TrimRight(line, "\r\n")
	if pw == "" {
		return "", usageErr("no password on stdin (pipe it in: echo \"$PW\" | switchboard admin create --username NAME)")
	}
	return pw, nil
}
