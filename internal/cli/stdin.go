package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Secrets the CLI is given (an operator's password, a producer's signing secret)
// come from stdin, so that they never show in ps or shell history: piped in, or
// typed at a terminal, where they are asked for and not echoed.

// readPassword reads a new password: typed twice at a terminal, or the first line
// of stdin when it is piped.
func readPassword(ctx context.Context, env *environ) (string, error) {
	if fd, ok := terminalIn(env); ok {
		pw, err := promptHidden(ctx, env, fd, "Password (8 to 72 bytes): ")
		if err != nil {
			return "", err
		}
		again, err := promptHidden(ctx, env, fd, "The same again: ")
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
		return "", usageErr("no password on stdin (pipe it in: echo \"$PW\" | switchboard operator create --username NAME, or run it at a terminal to be asked)")
	case err != nil:
		return "", err
	case pw == "":
		return "", usageErr("the password on stdin is empty (is the variable you piped in set?)")
	}
	return pw, nil
}

// readSecret reads one secret: typed at a terminal after a prompt naming what,
// or the first line of stdin when it is piped.
func readSecret(ctx context.Context, env *environ, what string) (string, error) {
	if fd, ok := terminalIn(env); ok {
		s, err := promptHidden(ctx, env, fd, what+": ")
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
	_, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	return fd, err == nil
}

// promptHidden asks on stderr and reads a line from the terminal fd without
// echoing it, as golang.org/x/term's ReadPassword does, but gives up when ctx ends (Ctrl-C:
// main catches SIGINT to end ctx, so a read would go on, unseen,
// until Enter). Echo is turned off here rather than in the read, so that the
// read left behind by an interrupt cannot turn it off again after it was
// given back.
func promptHidden(ctx context.Context, env *environ, fd int, prompt string) (string, error) {
	old, err := unix.IoctlGetTermios(fd, unix.TCGETS)
	if err != nil {
		return "", fmt.Errorf("read from the terminal: %w", err)
	}
	hidden := *old
	hidden.Lflag &^= unix.ECHO
	hidden.Lflag |= unix.ICANON | unix.ISIG
	hidden.Iflag |= unix.ICRNL
	if err := unix.IoctlSetTermios(fd, unix.TCSETS, &hidden); err != nil {
		return "", fmt.Errorf("read from the terminal: %w", err)
	}
	defer unix.IoctlSetTermios(fd, unix.TCSETS, old)
	fmt.Fprint(env.stderr, prompt)
	type read struct {
		line string
		err  error
	}
	done := make(chan read, 1)
	go func() {
		line, err := readTerminalLine(fd)
		done <- read{line, err}
	}()
	select {
	case r := <-done:
		fmt.Fprintln(env.stderr)
		if r.err != nil {
			return "", fmt.Errorf("read from the terminal: %w", r.err)
		}
		return strings.TrimRight(r.line, "\r\n"), nil
	case <-ctx.Done():
		fmt.Fprintln(env.stderr)
		return "", errors.New("interrupted: nothing was changed")
	}
}

// readTerminalLine reads one line from the terminal fd, a byte at a time so
// that nothing after it is taken.
func readTerminalLine(fd int) (string, error) {
	var line []byte
	var b [1]byte
	for {
		n, err := unix.Read(fd, b[:])
		switch {
		case n == 1 && b[0] == '\n':
			return string(line), nil
		case n == 1:
			line = append(line, b[0])
		case err == unix.EINTR:
		case err != nil:
			return "", err
		case len(line) == 0:
			return "", io.EOF
		default: // Ctrl-D after some text
			return string(line), nil
		}
	}
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
