package agent

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/mark3labs/mcp-go/server"

	"github.com/switchboardhq/switchboard/store"
)

// ChannelMethod is the notification that rings an agent's doorbell.
const ChannelMethod = "notifications/claude/channel"

// doorbell carries claimable-todo announcements from the store's commit path to
// Run. publish runs on the store's writer goroutine, so it must never block: a full
// queue drops the ring (and counts it); the todo stays in the queue either way. A
// ring may reach an agent while the commit is still being synced to the disk; the
// agent's claim_next is a later write, answered only after a sync that covers both.
type doorbell struct {
	ch      chan store.TodoChange
	dropped atomic.Int64 // rings dropped because ch was full
	blocked atomic.Int64 // notifications dropped because a session's buffer was full
	sent    atomic.Int64 // notifications handed to a session
}

func newDoorbell(size int) *doorbell {
	return &doorbell{ch: make(chan store.TodoChange, size)}
}

// publish is the store hook.
func (d *doorbell) publish(c store.TodoChange) {
	if !c.Claimable {
		return
	}
	select {
	case d.ch <- c:
	default:
		d.dropped.Add(1)
	}
}

// ring tells every session with an open stream, and every listener (listen.go),
// whose endpoint may work c's queue, that the todo is ready.
func (a *Agent) ring(c store.TodoChange) {
	params := map[string]any{
		"content": fmt.Sprintf("todo %d ready on queue %s", c.ID, c.Queue),
		"meta": map[string]string{
			"queue":   c.Queue,
			"todo_id": strconv.FormatInt(c.ID, 10),
			"source":  c.Source,
		},
	}
	a.ringListeners(c, params)
	for _, x := range a.sessions.all() {
		if !x.listening() || !slices.Contains(x.endpoint().Queues, c.Queue) {
			continue
		}
		err := a.mcp.SendNotificationToSpecificClient(x.id, ChannelMethod, params)
		switch {
		case err == nil:
			a.bell.sent.Add(1)
		case errors.Is(err, server.ErrNotificationChannelBlocked):
			a.bell.blocked.Add(1)
		default:
			// The session ended between the snapshot and the send.
		}
	}
}
