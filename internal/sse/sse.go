// Package sse reads a text/event-stream body (Server-Sent Events, as the WHATWG
// spec describes them), bounded in size: the MCP bridge reads its notification
// stream and streamed answers with it, and the bench its answers.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// Event is one dispatched Server-Sent Event.
type Event struct {
	// Name is the event type; "" means the default, "message".
	Name string
	Data []byte
	// ID is the stream's last event ID at dispatch time (SSE ids are sticky).
	ID string
	// Retry is the reconnection delay the server last asked for on this
	// stream (sticky, like ID), 0 when it did not.
	Retry time.Duration
}

// ErrEventTooLarge stops a stream whose single event exceeds the size limit, so a
// broken or hostile server cannot make the reader buffer without bound.
var ErrEventTooLarge = errors.New("server-sent event too large")

// Read parses a text/event-stream body and calls fn for each event that carries
// data. It returns nil at the end of the stream, fn's error, or the read error.
func Read(r io.Reader, maxBytes int, fn func(Event) error) error {
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
				ev := Event{Name: name, Data: bytes.TrimSuffix(data.Bytes(), []byte("\n")), ID: lastID, Retry: retry}
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
				return fmt.Errorf("%w (over %d bytes)", ErrEventTooLarge, maxBytes)
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
			return nil, fmt.Errorf("%w (line over %d bytes)", ErrEventTooLarge, maxBytes)
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
