package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// doorbell measures enqueue → notification: agents sit on their GET streams (on
// the processes other than the first, when t names several); one delivery at a
// time, to the first, at random gaps, and the first session to hear of its todo
// stops the clock. The ring can arrive before the delivery's answer (it is sent
// after the commit, before the response), so both orders are matched up.
func doorbell(ctx context.Context, t Target, httpc *http.Client, h webhook, cfg Config, seq *atomic.Int64, r *Report) error {
	var mu sync.Mutex
	sent := map[string]time.Time{}    // todo id → enqueue start, ring not heard yet
	arrived := map[string]time.Time{} // todo id → ring heard before the answer came
	seen := map[string]bool{}
	lat, answered := &Latencies{}, &Latencies{}
	onNote := func(n mcp.JSONRPCNotification) {
		if n.Method != "notifications/claude/channel" {
			return
		}
		at := time.Now()
		meta, _ := n.Params.AdditionalFields["meta"].(map[string]any)
		id := str(meta["todo_id"])
		mu.Lock()
		defer mu.Unlock()
		if seen[id] {
			return
		}
		seen[id] = true
		if t0, ok := sent[id]; ok {
			lat.Add(at.Sub(t0))
			delete(sent, id)
		} else {
			arrived[id] = at
		}
	}
	for i := 0; i < cfg.Agents; i++ {
		c, err := connect(ctx, t.bellSession(i), cfg.CallTimeout, onNote)
		if err != nil {
			return err
		}
		defer c.Close()
	}
	time.Sleep(300 * time.Millisecond) // let every GET stream attach
	rung := 0
	var errs failures
	for i := 0; i < cfg.Doorbells && ctx.Err() == nil; i++ {
		time.Sleep(time.Duration(5+rand.IntN(20)) * time.Millisecond)
		id := "bell-" + strconv.FormatInt(seq.Add(1), 10)
		body := []byte(`{"id":"` + id + `","action":"ring"}`)
		t0 := time.Now()
		todoID, err := deliverForID(ctx, httpc, h, id, body)
		if err != nil {
			if stalledCall(ctx, err) {
				return fmt.Errorf("bench: doorbell: %w", errNoAnswer("a delivery", httpc.Timeout, err))
			}
			errs.add(err)
			continue
		}
		answered.Add(time.Since(t0))
		rung++
		mu.Lock()
		if at, ok := arrived[todoID]; ok {
			lat.Add(at.Sub(t0))
			delete(arrived, todoID)
		} else {
			sent[todoID] = t0
		}
		mu.Unlock()
	}
	time.Sleep(200 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	r.Doorbell.Sessions = cfg.Agents
	r.Doorbell.AcrossProcesses = t.processes() > 1
	r.Doorbell.Rung = rung
	r.Doorbell.Missed = len(sent)
	r.Doorbell.Errors = errs.n.Load()
	if ctx.Err() == nil {
		// Latencies of a few rings, or of none, would describe the failures.
		if err := errs.tooMany(cfg.Doorbells); err != nil {
			return fmt.Errorf("bench: doorbell: %w", err)
		}
	}
	r.Doorbell.Latency = lat.Summary()
	r.Doorbell.Answered = answered.Summary()
	return nil
}

// deliverForID posts one delivery and returns the todo id from the answer.
func deliverForID(ctx context.Context, c *http.Client, h webhook, id string, body []byte) (string, error) {
	hdr, err := signed(h, id, body)
	if err != nil {
		return "", err
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	req.Header = hdr
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var ans map[string]any
	derr := json.NewDecoder(resp.Body).Decode(&ans)
	if resp.StatusCode/100 != 2 {
		return "", fmt.Errorf("delivery answered %d", resp.StatusCode)
	}
	if derr != nil && !errors.Is(derr, io.EOF) {
		return "", fmt.Errorf("read the delivery's answer: %w", derr)
	}
	switch v := ans["todo_id"].(type) {
	case float64:
		return strconv.FormatInt(int64(v), 10), nil
	case string:
		return v, nil
	}
	return "", fmt.Errorf("delivery answer has no todo_id")
}
