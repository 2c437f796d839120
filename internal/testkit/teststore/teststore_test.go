package teststore

import (
	"context"
	"testing"

	"github.com/switchboardhq/switchboard/store"
)

// Two handles on one file see each other's writes, as two processes do.
func TestOpenAndOpenPath(t *testing.T) {
	st := Open(t, store.Options{Synchronous: store.SyncNormal})
	td, err := st.AddTodo(context.Background(), store.NewTodo{Queue: "inbox", Payload: "{}"})
	if err != nil {
		t.Fatal(err)
	}
	other := OpenPath(t, st.Path(), store.Options{})
	if got, err := other.Todo(context.Background(), td.ID); err != nil || got.Queue != "inbox" {
		t.Fatalf("the other handle read %+v, %v", got, err)
	}
}
