package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/term"
)

// Secrets the CLI is given (an operator's password, a producer's signing secret)
// come from stdin, so that they never show in ps or shell history: piped in, or
// typed at a terminal, where they are asked for and not echoed.

// readPassword reads a new password: typed twice at a terminal, or the first line
// of stdin when it is piped.
func readPassword(env *environ) (string, error) {
	if fd, ok := terminalIn(env); ok {
		pw, err := promptHidden(env, fd, "Password (8 to 72 bytes): ")
		if err != nil {
			return "", err
		}
		again, err := promptHidden(env, fd, "The same again: ")
		if err != nil {
			return "", err
		}
		if pw != again {
			return "", usageErr("the two passwords differ: nothing was changed")
		}
		if pw == "" {
			return "", usageErr("no password typed")
		}
		return pw, nil
	}
	pw, err := firstLine(env.stdin)
	switch {
	case errors.Is(err, errNothingPiped):
		return "", usageErr("no password on stdin (pipe it in: echo \"$PW\" | switchboard admin create --username NAME, or run it at a terminal to be asked)")
	case err != nil:
		return "", err
	case pw == "":
		return "", usageErr("the password on stdin is empty (is the variable you piped in set?)")
	}
	return pw, nil
}

// readSecret reads one secret: typed at a terminal after a prompt naming what,
// or the first line of stdin when it is piped.
func readSecret(env *environ, what string) (string, error) {
	if fd, ok := terminalIn(env); ok {
		s, err := promptHidden(env, fd, what+": ")
		if err == nil && s == "" {
			err = fmt.Errorf("no %s typed", strings.ToLower(what))
		}
		return s, err
	}
	s, err := firstLine(env.stdin)
	if err == nil && s == "" {
		err = errNothingPiped
	}
	if err != nil {
		return "", fmt.Errorf("no %s on stdin", strings.ToLower(what))
	}
	return s, nil
}

// terminalIn returns stdin's descriptor when it is a terminal.
func terminalIn(env *environ) (int, bool) {
	f, ok := env.stdin.(*os.File)
	if !ok {
		return 0, false
	}
	fd := int(f.Fd())
	return fd, term.IsTerminal(fd)
}

// promptHidden asks on stderr and reads a line from the terminal fd without
// echoing it.
func promptHidden(env *environ, fd int, prompt string) (string, error) {
	fmt.Fprint(env.stderr, prompt)
	b, err := term.ReadPassword(fd)
	fmt.Fprintln(env.stderr)
	if err != nil {
		return "", fmt.Errorf("read from the terminal: %w", err)
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// errNothingPiped: stdin ended before anything was read.
var errNothingPiped = errors.New("nothing on stdin")

// firstLine reads the first line of r, without its line ending.
func firstLine(r io.Reader) (string, error) {
	line, err := bufio.NewReader(io.LimitReader(r, 4096)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", fmt.Errorf("read stdin: %w", err)
	}
	if line == "" {
		return "", errNothingPiped
	}
	return strings.TrimRight(line, "\r\n"), nil
}
