package sse

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
		want   []Event
	}{
		{
			name:   "mcp-go framing",
			stream: "event: message\nid: 7\ndata: {\"a\":1}\n\n",
			want:   []Event{{Name: "message", ID: "7", Data: []byte(`{"a":1}`)}},
		},
		{
			name:   "data lines are joined with newlines",
			stream: "data: {\"a\":\ndata: 1}\n\n",
			want:   []Event{{Data: []byte("{\"a\":\n1}")}},
		},
		{
			name:   "CRLF endings, comments, no space after the colon",
			stream: ": keep-alive\r\ndata:x\r\n\r\n",
			want:   []Event{{Data: []byte("x")}},
		},
		{
			name:   "id and retry stay for later events",
			stream: "id: 1\nretry: 2500\ndata: a\n\ndata: b\n\n",
			want: []Event{
				{ID: "1", Retry: 2500 * time.Millisecond, Data: []byte("a")},
				{ID: "1", Retry: 2500 * time.Millisecond, Data: []byte("b")},
			},
		},
		{
			name:   "a block without data dispatches nothing",
			stream: "event: ping\n\ndata: c\n\n",
			want:   []Event{{Data: []byte("c")}},
		},
		{
			name:   "an unterminated last event is discarded",
			stream: "data: whole\n\ndata: half",
			want:   []Event{{Data: []byte("whole")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []Event
			err := Read(strings.NewReader(tt.stream), 1<<20, func(ev Event) error {
				ev.Data = append([]byte(nil), ev.Data...)
				got = append(got, ev)
				return nil
			})
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d events %+v, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				g, w := got[i], tt.want[i]
				if g.Name != w.Name || g.ID != w.ID || g.Retry != w.Retry || string(g.Data) != string(w.Data) {
					t.Errorf("event %d = {name:%q id:%q retry:%v data:%q}, want {name:%q id:%q retry:%v data:%q}",
						i, g.Name, g.ID, g.Retry, g.Data, w.Name, w.ID, w.Retry, w.Data)
				}
			}
		})
	}
}

func TestReadSSETooLarge(t *testing.T) {
	stream := "data: " + strings.Repeat("x", 100) + "\ndata: " + strings.Repeat("y", 100) + "\n\n"
	err := Read(strings.NewReader(stream), 150, func(Event) error {
		t.Error("an oversized event was dispatched")
		return nil
	})
	if !errors.Is(err, ErrEventTooLarge) {
		t.Fatalf("err = %v, want ErrEventTooLarge", err)
	}
}
