package bridge

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestReadSSE(t *testing.T) {
	tests := []struct {
		name   string
		stream string
		want   []sseEvent
	}{
		{
			name:   "mcp-go framing",
			stream: "event: message\nid: 7\ndata: {\"a\":1}\n\n",
			want:   []sseEvent{{name: "message", id: "7", data: []byte(`{"a":1}`)}},
		},
		{
			name:   "data lines are joined with newlines",
			stream: "data: {\"a\":\ndata: 1}\n\n",
			want:   []sseEvent{{data: []byte("{\"a\":\n1}")}},
		},
		{
			name:   "CRLF endings, comments, no space after the colon",
			stream: ": keep-alive\r\ndata:x\r\n\r\n",
			want:   []sseEvent{{data: []byte("x")}},
		},
		{
			name:   "id and retry stay for later events",
			stream: "id: 1\nretry: 2500\ndata: a\n\ndata: b\n\n",
			want: []sseEvent{
				{id: "1", retry: 2500 * time.Millisecond, data: []byte("a")},
				{id: "1", retry: 2500 * time.Millisecond, data: []byte("b")},
			},
		},
		{
			name:   "a block without data dispatches nothing",
			stream: "event: ping\n\ndata: c\n\n",
			want:   []sseEvent{{data: []byte("c")}},
		},
		{
			name:   "an unterminated last event is discarded",
			stream: "data: whole\n\ndata: half",
			want:   []sseEvent{{data: []byte("whole")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []sseEvent
			err := readSSE(strings.NewReader(tt.stream), 1<<20, func(ev sseEvent) error {
				ev.data = append([]byte(nil), ev.data...)
				got = append(got, ev)
				return nil
			})
			if err != nil {
				t.Fatalf("readSSE: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.name != w.name || g.id != w.id || g.retry != w.retry || string(g.data) != string(w.data) {
					t.Errorf("event %d = {name:%q id:%q retry:%v data:%q}, want {name:%q id:%q retry:%v data:%q}",
						i, g.name, g.id, g.retry, g.data, w.name, w.id, w.retry, w.data)
				}
			}
		})
	}
}

func TestReadSSETooLarge(t *testing.T) {
	stream := "data: " + strings.Repeat("x", 100) + "\ndata: " + strings.Repeat("y", 100) + "\n\n"
	err := readSSE(strings.NewReader(stream), 150, func(sseEvent) error {
		t.Error("an oversized event was dispatched")
		return nil
	})
	if !errors.Is(err, errEventTooLarge) {
		t.Fatalf("err = %v, want errEventTooLarge", err)
	}
}
