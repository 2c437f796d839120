// Package httpbody reads a request body from a stranger: within a byte bound and a
// time bound, reserving memory only for bytes that have arrived. A handler calls
// Guard first and Read when it wants the body. It must never read past the bound,
// and never leave a read deadline behind a body it read.
package httpbody

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"time"
)

// DefaultTimeout bounds how long a whole body may take to arrive. The server sets
// no ReadTimeout (a read deadline on a long-lived /mcp stream cancels it), so
// without this a client that declares a body and sends it a byte at a time, or
// never, holds a connection and its buffer for as long as it likes. 30 s is far
// longer than any webhook producer or MCP client takes to send a megabyte.
const DefaultTimeout = 30 * time.Second

// maxReserve bounds what a declared Content-Length reserves before its bytes
// arrive; past it the buffer grows as they do.
const maxReserve = 64 << 10

// Guard makes an answer given before Read, or after Read failed, end the
// connection at once instead of reading on: net/http otherwise reads up to 256 KiB
// of an unread body after the handler, for as long as the client takes to send it.
// It expires the connection's read deadline; nothing reads the connection between
// the request's header and its body, so this stops only that. A request without a
// body is left alone: net/http is already watching its connection for a hang-up,
// and an expired deadline there would cancel the request's context.
//
// HTTP/2 is left alone too: it never reads a body after the handler (it resets the
// stream), and an expired deadline there closes the body for good.
func Guard(w http.ResponseWriter, r *http.Request) {
	if !unreadBody(r) {
		return
	}
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}

// Bound gives every request with a body timeout to send it, whatever its
// handler does with it: one that reads it with Read or ParseForm gets their
// deadline instead; one that ignores it (a 404, a 405, a route without a body) is
// not held open while net/http drains the body after it. net/http clears the
// deadline itself once a body is read to its end, so a handler that then waits
// (a store write, an SSE answer) is not cut off.
func Bound(next http.Handler, timeout time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if unreadBody(r) {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(timeout))
		}
		next.ServeHTTP(w, r)
	})
}

// Read reads r's body: at most max bytes, all of it within timeout. A non-zero
// status is the answer owed instead: 413 over the bound (declared or sent), 408
// not in time, 400 unreadable.
func Read(w http.ResponseWriter, r *http.Request, max int64, timeout time.Duration) ([]byte, int) {
	if r.ContentLength > max {
		Guard(w, r) // refused unread: do not wait for it either
		return nil, http.StatusRequestEntityTooLarge
	}
	rc := http.NewResponseController(w)
	// A writer that cannot take a deadline (none the server hands out) still has
	// the byte bound.
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(min(r.ContentLength, maxReserve)) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, max))
	if err != nil {
		Guard(w, r) // the rest of the body is not wanted either
		return nil, status(err)
	}
	// What runs next may wait on the store; a deadline left set would end the
	// request's context under it.
	_ = rc.SetReadDeadline(time.Time{})
	return buf.Bytes(), 0
}

// ParseForm reads r's form body with Read (within max bytes and timeout, whatever
// its Content-Type) and then parses it as r.ParseForm does. A non-zero status is
// the answer owed instead: Read's, or 400 for a body that is in but is not a form.
func ParseForm(w http.ResponseWriter, r *http.Request, max int64, timeout time.Duration) int {
	body, status := Read(w, r, max, timeout)
	if status != 0 {
		return status
	}
	// The body is all in, so a parse error leaves nothing on the wire to guard.
	r.Body = io.NopCloser(bytes.NewReader(body))
	if err := r.ParseForm(); err != nil {
		return http.StatusBadRequest
	}
	return 0
}

// status is the answer owed for a body that could not be read: 413 past the
// bound, 408 past the deadline, else 400.
func status(err error) int {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, os.ErrDeadlineExceeded):
		return http.StatusRequestTimeout
	}
	return http.StatusBadRequest
}

// unreadBody reports whether r has a body that an HTTP/1 connection may still be
// waiting on: the one case a read deadline is for (see Guard).
func unreadBody(r *http.Request) bool {
	return r.Body != nil && r.Body != http.NoBody && r.ProtoMajor < 2
}
