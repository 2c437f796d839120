package modules

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
)

// maxFrame bounds one MCP message from a module; a longer line breaks the
// session rather than growing the gateway's memory without end.
const maxFrame = 32 << 20

// errGarbage marks stdout output that is not a JSON-RPC message.
var errGarbage = errors.New("stdout is not JSON-RPC")

// frameReader sits between a module's stdout and mcp-go's transport. The
// transport silently skips lines it cannot parse, but stdout is the
// protocol: anything else there means the module is broken, so the first bad
// line (or an overlong one, or EOF) ends the stream and reports why. The
// transport itself only ever sees io.EOF, which makes it fail pending
// requests without logging on its own.
type frameReader struct {
	src     *bufio.Reader
	pending []byte

	once   sync.Once
	ended  chan struct{} // closed when the stream ends
	reason error         // why it ended; valid after ended
}

func newFrameReader(r io.Reader) *frameReader {
	return &frameReader{src: bufio.NewReaderSize(r, 64<<10), ended: make(chan struct{})}
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
		if !isJSONRPC(line) {
			f.end(fmt.Errorf("%w: %q", errGarbage, preview(line)))
			return 0, io.EOF
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

func isJSONRPC(line []byte) bool {
	var head struct {
		JSONRPC string `json:"jsonrpc"`
	}
	return line[0] == '{' && json.Unmarshal(line, &head) == nil && head.JSONRPC == "2.0"
}

func preview(b []byte) string {
	const n = 80
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
