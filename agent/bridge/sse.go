package bridge

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// sseEvent is one dispatched Server-Sent Event.
type sseEvent struct {
	// name is the event type; "" means the default, "message".
	name string
	data []byte
	// id is the stream's last event ID at dispatch time (SSE ids are sticky).
	id string
	// retry is the reconnection delay the server last asked for on this
	// stream (sticky, like id), 0 when it did not.
	retry time.Duration
}

// errEventTooLarge stops a stream whose single event exceeds the size limit, so a
// broken or hostile server cannot make the bridge buffer without bound.
var errEventTooLarge = errors.New("server-sent event too large")

// readSSE parses a text/event-stream body as the WHATWG spec describes and calls
// fn for each event that carries data. It returns nil at the end of the stream,
// fn's error, or the read error.
func readSSE(r io.Reader, maxBytes int, fn func(sseEvent) error) error {
	br := bufio.NewReaderSize(r, 64*1024)
	var (
		data    bytes.Buffer
		name    string
		lastID  string
		retry   time.Duration
		hasData bool
	)
	for {
		line, err := readLine(br, maxBytes)
		if errors.Is(err, io.EOF) {
			// A last event not closed by a blank line is discarded, per the spec.
			return nil
		}
		if err != nil {
			return err
		}
		if len(line) == 0 {
			if hasData {
				ev := sseEvent{name: name, data: bytes.TrimSuffix(data.Bytes(), []byte("\n")), id: lastID, retry: retry}
				if ferr := fn(ev); ferr != nil {
					return ferr
				}
			}
			data.Reset()
			name, hasData = "", false
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "": // a comment line, e.g. a keep-alive
		case "data":
			if data.Len()+len(value) > maxBytes {
				return fmt.Errorf("%w (over %d bytes)", errEventTooLarge, maxBytes)
			}
			data.Write(value)
			data.WriteByte('\n')
			hasData = true
		case "event":
			name = string(value)
		case "id":
			if !bytes.ContainsRune(value, 0) {
				lastID = string(value)
			}
		case "retry":
			if ms, perr := strconv.Atoi(string(value)); perr == nil && ms >= 0 {
				retry = time.Duration(ms) * time.Millisecond
			}
		}
	}
}

// readLine returns the next line without its \n or \r\n ending.
func readLine(br *bufio.Reader, maxBytes int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		if len(line)+len(chunk) > maxBytes+2 {
			return nil, fmt.Errorf("%w (line over %d bytes)", errEventTooLarge, maxBytes)
		}
		line = append(line, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		return line, err
	}
}
