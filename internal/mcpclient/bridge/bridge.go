// Package bridge is the relay behind `switchboard connect`: it lets an agent whose
// MCP client only launches stdio servers attach Switchboard like a local server.
// It reads newline-delimited JSON-RPC on stdin, sends each message to the MCP
// Streamable HTTP endpoint, writes every answer back to stdout as one line, and
// relays what the server pushes on its notification stream (the doorbell,
// notifications/claude/channel; notifications/tools/list_changed) the same way.
//
// The credential travels only in the Authorization header: never in argv, a log
// line or an error. Message contents (todo payloads) are never logged either.
package bridge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"
)

// ErrUnauthorized is returned by Run when the server rejects the credential
// (HTTP 401). Nothing the bridge can retry fixes that, so it stops.
var ErrUnauthorized = errors.New("the server rejected the credential (HTTP 401 Unauthorized)")

// Options tune a Bridge; the zero value is ready for production.
type Options struct {
	// HTTPClient sends every request. It must not set a Timeout: the
	// notification stream and SSE answers stay open for as long as they run.
	HTTPClient *http.Client
	// Logger receives the bridge's own diagnostics (stderr under `connect`).
	Logger *slog.Logger
	// MinBackoff and MaxBackoff bound the wait before reopening a dropped
	// notification stream; it doubles from Min to Max while reconnects fail.
	MinBackoff, MaxBackoff time.Duration
	// MaxInFlight caps the requests relayed at once; more wait for a slot.
	MaxInFlight int
	// MaxMessageBytes caps one JSON-RPC message in either direction.
	MaxMessageBytes int
	// DrainTimeout is how long, once stdin closes, in-flight requests may still
	// finish so their answers reach stdout before the session is ended.
	DrainTimeout time.Duration
}

// Bridge relays one stdio MCP client to one Streamable HTTP endpoint.
type Bridge struct {
	url        string
	credential string
	client     *http.Client
	log        *slog.Logger
	minBackoff time.Duration
	maxBackoff time.Duration
	maxFlight  int
	maxBytes   int
	drain      time.Duration
}

// New returns a Bridge for the MCP endpoint url (e.g. https://host/mcp) that
// authenticates with credential as a bearer token.
func New(url, credential string, opts Options) *Bridge {
	b := &Bridge{
		url:        url,
		credential: credential,
		client:     opts.HTTPClient,
		log:        opts.Logger,
		minBackoff: opts.MinBackoff,
		maxBackoff: opts.MaxBackoff,
		maxFlight:  opts.MaxInFlight,
		maxBytes:   opts.MaxMessageBytes,
		drain:      opts.DrainTimeout,
	}
	if b.client == nil {
		b.client = &http.Client{}
	}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.minBackoff <= 0 {
		b.minBackoff = 500 * time.Millisecond
	}
	if b.maxBackoff < b.minBackoff {
		b.maxBackoff = max(30*time.Second, b.minBackoff)
	}
	if b.maxFlight <= 0 {
		b.maxFlight = 16
	}
	if b.maxBytes <= 0 {
		b.maxBytes = 16 << 20
	}
	if b.drain <= 0 {
		b.drain = 30 * time.Second
	}
	return b
}

// Run relays between in/out and the endpoint with default Options; see
// (*Bridge).Run.
func Run(ctx context.Context, url, credential string, in io.Reader, out io.Writer, logger *slog.Logger) error {
	return New(url, credential, Options{Logger: logger}).Run(ctx, in, out)
}

// Run relays until in reaches EOF, ctx ends, or the server rejects the
// credential. On the way out it ends the MCP session with a DELETE. It returns
// nil after EOF on in, ctx.Err() when ctx ended first, and an error wrapping
// ErrUnauthorized on HTTP 401. A Bridge runs one session at a time.
func (b *Bridge) Run(ctx context.Context, in io.Reader, out io.Writer) error {
	runCtx, fail := context.WithCancelCause(ctx)
	defer fail(nil)
	r := newRelay(b, out, fail)

	lines := make(chan []byte)
	readDone := make(chan error, 1)
	go func() { readDone <- readLines(in, b.maxBytes, lines, runCtx.Done()) }()

	var readErr error
loop:
	for {
		select {
		case <-runCtx.Done():
			break loop
		case line, ok := <-lines:
			if !ok {
				readErr = <-readDone
				break loop
			}
			r.handle(runCtx, line)
		}
	}

	r.drainRequests(runCtx, b.drain)
	r.stopStream()
	r.endSession(ctx)

	if err := ctx.Err(); err != nil {
		return err
	}
	if cause := context.Cause(runCtx); cause != nil {
		return cause // a fatal error: the credential was rejected, stdout broke
	}
	if readErr != nil {
		return fmt.Errorf("bridge: read stdin: %w", readErr)
	}
	return nil
}

// readLines sends each line of in to lines and closes it at EOF or on error.
func readLines(in io.Reader, maxBytes int, lines chan<- []byte, done <-chan struct{}) error {
	defer close(lines)
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64*1024), maxBytes)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		select {
		case lines <- line:
		case <-done:
			return nil
		}
	}
	return sc.Err()
}

// lineWriter writes whole lines to stdout, one writer at a time, and reports the
// first write error: a client that closed its stdin cannot hear us any more.
type lineWriter struct {
	mu      sync.Mutex
	w       io.Writer
	failed  bool
	onError func(error)
}

func (lw *lineWriter) writeLine(line []byte) {
	lw.mu.Lock()
	defer lw.mu.Unlock()
	if lw.failed {
		return
	}
	buf := make([]byte, 0, len(line)+1)
	buf = append(append(buf, line...), '\n')
	if _, err := lw.w.Write(buf); err != nil {
		lw.failed = true
		lw.onError(fmt.Errorf("bridge: write stdout: %w", err))
	}
}
