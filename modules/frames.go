package modules

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/time/rate"

	"github.com/switchboardhq/switchboard/internal/textcut"
)

// maxFrame bounds one MCP message from a module. A longer line is read on
// without being kept: when it is the answer to one of the gateway's requests
// (its id found near either end), that request is answered with an error in its
// place and the session goes on; anything else breaks the session.
const maxFrame = 32 << 20

// idWindow is how much of an over-long message's start and end is kept to find
// its id: SDKs write it near the start (mcp-go, Python) or at the end (the
// TypeScript SDK, after the result).
const idWindow = 4 << 10

// maxSkipped bounds how much of an over-long message is read on (and dropped) to
// find its end: past it (a module writing without end) the session breaks.
// Reading a GiB on costs a fraction of a second.
const maxSkipped = 1 << 30

// tailID finds the id of an answer to the gateway's own requests ("sb-N") where
// the TypeScript SDK writes it: the last member of the message.
var tailID = regexp.MustCompile(`"id"\s*:\s*"(sb-[0-9]+)"\s*}\s*$`)

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
// bytes long; in place of a longer one that answers a request of the gateway's,
// an error answer to that request (skipLong).
func readFrame(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(line)+len(chunk) > maxFrame {
			line = append(line, chunk...)
			return skipLong(r, line[:idWindow], line[len(line)-idWindow:], err)
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

// skipLong reads the rest of an over-long line, keeping only its end, and
// returns an error answer to the request of the gateway's that the line answers;
// failing that (a message from the module of its own), an error that breaks the
// session. head and tail are the line's start and its end so far; err is what
// reading its last chunk returned.
func skipLong(r *bufio.Reader, head, tail []byte, err error) ([]byte, error) {
	head, tail = bytes.Clone(head), bytes.Clone(tail)
	skipped := maxFrame
	for errors.Is(err, bufio.ErrBufferFull) {
		var chunk []byte
		chunk, err = r.ReadSlice('\n')
		if skipped += len(chunk); skipped > maxSkipped {
			return nil, fmt.Errorf("stdout message longer than %d bytes, and no end to it within %d MiB", maxFrame, maxSkipped>>20)
		}
		tail = append(tail, chunk...)
		if len(tail) > 2*idWindow {
			tail = append(tail[:0], tail[len(tail)-idWindow:]...)
		}
	}
	switch {
	case err == nil:
	case errors.Is(err, io.EOF):
		return nil, errors.New("stdout closed")
	default:
		return nil, fmt.Errorf("read stdout: %w", err)
	}
	id := headID(head)
	if m := tailID.FindSubmatch(bytes.TrimSpace(tail)); id == "" && m != nil {
		id = string(m[1])
	}
	if id == "" {
		return nil, fmt.Errorf("stdout message longer than %d bytes", maxFrame)
	}
	answer, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{
		"code": -32603, "message": fmt.Sprintf("the module's answer was over %d MiB, more than the gateway takes "+
			"in one message: ask for less", maxFrame>>20)}})
	return append(answer, '\n'), nil
}

// headID is the id of one of the gateway's requests ("sb-N") that a message's
// start gives as a top-level member before its result or error (as mcp-go and
// Python write it), or "": an "id" inside the result is not the message's.
func headID(head []byte) string {
	dec := json.NewDecoder(bytes.NewReader(head))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return ""
		}
		switch key {
		case "id":
			var id string
			if dec.Decode(&id) != nil || !strings.HasPrefix(id, "sb-") {
				return ""
			}
			return id
		case "result", "error":
			return "" // the rest is the answer itself, and past the head
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
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

// preview is the start of a frame for a log line: 80 bytes and the ellipsis.
func preview(b []byte) string { return textcut.Bytes(string(b), 80+len(textcut.Ellipsis)) }
