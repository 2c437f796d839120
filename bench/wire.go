package bench

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// wire is one agent's HTTP/1.1 connection to the server, kept open across calls:
// a request is written out by hand and its answer read on the calling goroutine.
// net/http's client hands each request and answer between three goroutines (the
// caller's and the connection's reader and writer); on the machine it measures,
// with 8 agents calling all the time, that cost the bench more CPU than the server
// spent answering over HTTP. The server sees the same requests either way.
//
// A wire is used by one goroutine at a time. Any failure closes the connection;
// the next request dials again.
type wire struct {
	addr, host string
	tls        *tls.Config // nil for http
	timeout    time.Duration

	conn net.Conn
	br   *bufio.Reader
	buf  []byte
}

// newWire readies a connection to the server of rawURL (http or https); nothing is
// dialled yet. Each request is bounded by timeout (0: only by its context).
func newWire(rawURL string, timeout time.Duration) (*wire, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("bench: parse %q: %w", rawURL, err)
	}
	w := &wire{host: u.Host, timeout: timeout}
	port := u.Port()
	switch u.Scheme {
	case "http":
		if port == "" {
			port = "80"
		}
	case "https":
		if port == "" {
			port = "443"
		}
		w.tls = &tls.Config{ServerName: u.Hostname(), NextProtos: []string{"http/1.1"}}
	default:
		return nil, fmt.Errorf("bench: %q is not an http or https URL", rawURL)
	}
	w.addr = net.JoinHostPort(u.Hostname(), port)
	return w, nil
}

// requestPath is rawURL's path and query, as a request line carries them.
func requestPath(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", fmt.Errorf("bench: parse %q: %w", rawURL, err)
	}
	return u.RequestURI(), nil
}

// do sends one request for path (see requestPath) with the given headers (name,
// value pairs) and body, and returns the answer's status, headers and whole body
// (up to maxAnswer).
func (w *wire) do(ctx context.Context, method, path string, headers []string, body []byte) (*http.Response, []byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if w.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, w.timeout)
		defer cancel()
	}
	reused := w.conn != nil
	resp, data, err := w.try(ctx, method, path, headers, body)
	if err != nil && reused && errors.Is(err, errIdleClosed) && ctx.Err() == nil {
		// The server had closed the kept connection before this request reached
		// it (an idle timeout): the request was not seen, so it is sent again.
		resp, data, err = w.try(ctx, method, path, headers, body)
	}
	if err != nil {
		if ctx.Err() != nil {
			// The deadline set from ctx, or the cut in try: say which.
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return nil, nil, err
	}
	return resp, data, nil
}

// errIdleClosed marks a kept connection found closed before any of the answer
// came back.
var errIdleClosed = errors.New("the server closed the connection before answering")

// try makes one attempt on the kept connection, dialling one if there is none.
func (w *wire) try(ctx context.Context, method, path string, headers []string, body []byte) (*http.Response, []byte, error) {
	if w.conn == nil {
		if err := w.dial(ctx); err != nil {
			return nil, nil, err
		}
	}
	conn := w.conn
	if d, ok := ctx.Deadline(); ok {
		conn.SetDeadline(d)
	} else {
		conn.SetDeadline(time.Time{})
	}
	// A context that ends sooner (cancelled, say) cuts the connection short.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()

	resp, data, err := w.roundTrip(method, path, headers, body)
	if err != nil {
		w.close()
		return nil, nil, err
	}
	if resp.Close {
		w.close()
	}
	return resp, data, nil
}

func (w *wire) roundTrip(method, path string, headers []string, body []byte) (*http.Response, []byte, error) {
	b := w.buf[:0]
	b = append(b, method...)
	b = append(b, ' ')
	b = append(b, path...)
	b = append(b, " HTTP/1.1\r\nHost: "...)
	b = append(b, w.host...)
	b = append(b, "\r\nUser-Agent: switchboard-bench\r\n"...)
	for i := 0; i+1 < len(headers); i += 2 {
		b = append(b, headers[i]...)
		b = append(b, ": "...)
		b = append(b, headers[i+1]...)
		b = append(b, "\r\n"...)
	}
	b = append(b, "Content-Length: "...)
	b = strconv.AppendInt(b, int64(len(body)), 10)
	b = append(b, "\r\n\r\n"...)
	b = append(b, body...)
	w.buf = b
	if _, err := w.conn.Write(b); err != nil {
		if errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) {
			err = fmt.Errorf("%w: %w", errIdleClosed, err)
		}
		return nil, nil, err
	}
	if _, err := w.br.Peek(1); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
			err = fmt.Errorf("%w: %w", errIdleClosed, err)
		}
		return nil, nil, err
	}
	resp, err := http.ReadResponse(w.br, &http.Request{Method: method})
	if err != nil {
		return nil, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	resp.Body.Close()
	if err != nil {
		return nil, nil, err
	}
	if len(data) > maxAnswer {
		return nil, nil, fmt.Errorf("an answer of over %d bytes", maxAnswer)
	}
	if w.br.Buffered() > 0 {
		// Bytes past the answer: nothing this connection can be trusted with.
		return nil, nil, errors.New("the server sent more than the answer")
	}
	return resp, data, nil
}

func (w *wire) dial(ctx context.Context) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", w.addr)
	if err != nil {
		return err
	}
	if w.tls != nil {
		tc := tls.Client(conn, w.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			conn.Close()
			return err
		}
		conn = tc
	}
	w.conn = conn
	if w.br == nil {
		w.br = bufio.NewReaderSize(conn, 16<<10)
	} else {
		w.br.Reset(conn)
	}
	return nil
}

// close drops the connection, if there is one.
func (w *wire) close() {
	if w.conn != nil {
		w.conn.Close()
		w.conn = nil
	}
}
