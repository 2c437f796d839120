package bridge

import (
	"bytes"
	"encoding/json"
)

// codeBridge is the JSON-RPC error code of answers the bridge makes up itself
// when the server could not give one (unreachable, refused, no answer). It is
// in the range JSON-RPC leaves to implementations.
const codeBridge = -32000

// message is what the bridge needs to know about a client message to route it.
type message struct {
	ID        json.RawMessage
	Method    string
	params    json.RawMessage
	requestID json.RawMessage // params.requestId of notifications/cancelled
	version   string          // params._meta protocol version, if any
}

func parseMessage(line []byte) (message, error) {
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	}
	if err := json.Unmarshal(line, &m); err != nil {
		return message{}, err
	}
	msg := message{ID: m.ID, Method: m.Method, params: m.Params}
	var p struct {
		Meta      map[string]any  `json:"_meta"`
		RequestID json.RawMessage `json:"requestId"`
	}
	if json.Unmarshal(m.Params, &p) == nil {
		msg.requestID = p.RequestID
		msg.version, _ = p.Meta[metaProtocolVersion].(string)
	}
	return msg, nil
}

// isRequest reports whether the client waits for an answer to this message.
func (m message) isRequest() bool { return m.Method != "" && hasID(m.ID) }

func hasID(id json.RawMessage) bool {
	id = bytes.TrimSpace(id)
	return len(id) > 0 && !bytes.Equal(id, []byte("null"))
}

// answers reports whether the JSON-RPC message line is the result or error for
// the request msg.
func answers(line []byte, msg message) bool {
	var a struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	return json.Unmarshal(line, &a) == nil && bytes.Equal(compactJSON(a.ID), compactJSON(msg.ID)) &&
		(a.Result != nil || a.Error != nil)
}

// replyError answers a client request with a JSON-RPC error, so the client does
// not wait forever for an answer the server will never send. Notifications and
// answers have no one waiting.
func (r *relay) replyError(msg message, text string) {
	if msg.isRequest() {
		r.writeError(msg.ID, codeBridge, text)
	}
}

func (r *relay) writeError(id json.RawMessage, code int, text string) {
	type rpcError struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	line, err := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", compactJSON(id), rpcError{code, text}})
	if err != nil {
		r.log.Error("bridge: encode error answer", "err", err)
		return
	}
	r.out.writeLine(line)
}

// compactJSON returns data without insignificant whitespace (one line), or nil
// when data is not JSON.
func compactJSON(data []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil
	}
	return buf.Bytes()
}
