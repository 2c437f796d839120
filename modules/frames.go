package modules

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// maxFrame bounds one MCP message from a module; a longer line breaks the
// session rather than growing the gateway's memory without end.
const maxFrame = 32 << 20

// moduleRequestRate and moduleRequestBurst bound the requests a module may send
// the gateway (pings, and methods it will refuse): far above any keep-alive.
const (
	moduleRequestRate  = 20
	moduleRequestBurst = 100
)

// errGarbage marks stdout output that is not a JSON-RPC message.
var errGarbage = errors.New("stdout is not JSON-RPC")

// frameReader sits between a module's stdout and mcp-go's transport. The
// transport silently skips lines it cannot parse, but stdout is the
// protocol: anything else there means the module is broken, so the first bad
// line (or an overlong one, or EOF) ends the stream and reports why. The
// transport itself only ever sees io.EOF, which makes it fail pending
// requests without logging on its own.
type frameReader struct {
	src      *bufio.Reader
	pending  []byte
	requests *rate.Limiter // requests from the module that reach mcp-go
	dropped  atomic.Int64  // requests dropped past that rate

	once   sync.Once
	ended  chan struct{} // closed when the stream ends
	reason error         // why it ended; valid after ended
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{src: bufio.NewReaderSize(r, 64<<10), ended: make(chan struct{}),
		requests: rate.NewLimiter(moduleRequestRate, moduleRequestBurst)}
}

func (f *frameReader) Read(p []byte) (int, error) {
	for len(f.pending) == 0 {
		select {
		case <-f.ended:
			return 0, io.EOF
		default:
		}
		line, err := readFrame(f.src)
		if err != nil {
			f.end(err)
			return 0, io.EOF
		}
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		head, ok := parseHead(line)
		if !ok {
			f.end(fmt.Errorf("%w: %q", errGarbage, preview(line)))
			return 0, io.EOF
		}
		// mcp-go answers each request a module sends on a goroutine of its own,
		// which waits to write the answer; a module that floods requests (and
		// reads no answers) would grow those without end. The gateway expects
		// only pings, so requests past a generous rate are dropped unanswered.
		if head.isRequest() && !f.requests.Allow() {
			f.dropped.Add(1)
			continue
		}
		f.pending = append(line, '\n')
	}
	n := copy(p, f.pending)
	f.pending = f.pending[n:]
	return n, nil
}

func (f *frameReader) end(reason error) {
	f.once.Do(func() {
		f.reason = reason
		close(f.ended)
	})
}

// readFrame returns one newline-terminated line (a copy), at most maxFrame
// bytes long.
func readFrame(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxFrame {
			return nil, fmt.Errorf("stdout message longer than %d bytes", maxFrame)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF):
			return nil, errors.New("stdout closed")
		default:
			return nil, fmt.Errorf("read stdout: %w", err)
		}
	}
}

// frameHead is what the reader needs to know of a message: that it is JSON-RPC,
// and whether it is a request (a method and an id) the gateway must answer.
type frameHead struct {
	JSONRPC string          `json:"jsonrpc"`
	Method  string          `json:"method"`
	ID      json.RawMessage `json:"id"`
}

func parseHead(line []byte) (frameHead, bool) {
	var head frameHead
	ok := line[0] == '{' && json.Unmarshal(line, &head) == nil && head.JSONRPC == "2.0"
	return head, ok
}

func (h frameHead) isRequest() bool { return h.Method != "" && len(h.ID) > 0 && string(h.ID) != "null" }

func preview(b []byte) string {
	const n = 80
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
