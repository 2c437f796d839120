package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// session is what the server told us at initialize.
type session struct {
	id      string
	version string
}

func (r *relay) session() session {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sess
}

// renewSession starts a new MCP session after the server forgot stale (it
// answers 404 to it, saying why), by replaying the client's initialize. The
// client already has its answer, so the new one is not relayed.
func (r *relay) renewSession(ctx context.Context, stale, why string) error {
	r.renewMu.Lock()
	defer r.renewMu.Unlock()
	r.mu.Lock()
	current, initBody := r.sess, r.initBody
	r.mu.Unlock()
	if current.id != stale {
		return nil // renewed meanwhile by another request
	}
	if initBody == nil {
		return errors.New("no initialize to replay")
	}
	r.log.Warn("bridge: the server no longer knows the session; starting a new one", "server_said", why)

	initMsg, _ := parseMessage(initBody)
	req, err := r.newRequest(ctx, http.MethodPost, initBody, initMsg, session{})
	if err != nil {
		return err
	}
	resp, err := r.b.client.Do(req)
	if err != nil {
		return fmt.Errorf("initialize: %w", err)
	}
	defer discard(resp)
	if resp.StatusCode == http.StatusUnauthorized {
		r.reject(fmt.Errorf("bridge: renew session: %w", ErrUnauthorized))
		return ErrUnauthorized
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		return fmt.Errorf("initialize: HTTP %d: %s", resp.StatusCode, snippet(body))
	}
	renewed := session{id: resp.Header.Get(headerSessionID)}
	if err := r.eachMessage(resp, func(data []byte) {
		var a struct {
			Result struct {
				ProtocolVersion string `json:"protocolVersion"`
			} `json:"result"`
		}
		if json.Unmarshal(data, &a) == nil && a.Result.ProtocolVersion != "" {
			renewed.version = a.Result.ProtocolVersion
		}
	}); err != nil {
		return fmt.Errorf("initialize: read answer: %w", err)
	}

	initialized := []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	req, err = r.newRequest(ctx, http.MethodPost, initialized, message{Method: "notifications/initialized"}, renewed)
	if err != nil {
		return err
	}
	ack, err := r.b.client.Do(req)
	if err != nil {
		return fmt.Errorf("notifications/initialized: %w", err)
	}
	if ack.StatusCode < 200 || ack.StatusCode > 299 {
		// A fleet whose load balancer does not keep a session on its process
		// says so here: the new session is another process's already.
		return fmt.Errorf("notifications/initialized: HTTP %d: %s", ack.StatusCode, whyGone(ack))
	}
	discard(ack)

	r.mu.Lock()
	r.sess = renewed
	r.lastEventID = ""
	r.mu.Unlock()
	r.reconnectStream()
	return nil
}

// cancelInflight stops waiting for the answer to the request with this ID.
func (r *relay) cancelInflight(id json.RawMessage) {
	if !hasID(id) {
		return
	}
	r.mu.Lock()
	f, ok := r.inflight[string(compactJSON(id))]
	r.mu.Unlock()
	if ok {
		f.cancel()
	}
}

// drainRequests waits, after stdin closed, for in-flight requests to answer,
// for at most timeout. A subscriptions/listen stream never answers on its own,
// so it is closed at once.
func (r *relay) drainRequests(ctx context.Context, timeout time.Duration) {
	r.mu.Lock()
	for _, f := range r.inflight {
		if f.method == "subscriptions/listen" {
			f.cancel()
		}
	}
	r.mu.Unlock()

	done := make(chan struct{})
	go func() {
		r.requests.Wait()
		close(done)
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case <-done:
		return
	case <-ctx.Done():
	case <-timer.C:
		r.log.Warn("bridge: giving up on requests still unanswered after stdin closed", "after", timeout)
	}
	r.mu.Lock()
	for _, f := range r.inflight {
		f.cancel()
	}
	r.mu.Unlock()
	<-done
}

// endSession tells the server the session is over, so it frees it at once
// instead of at its idle timeout.
func (r *relay) endSession(parent context.Context) {
	r.mu.Lock()
	s, rejected := r.sess, r.rejected
	r.mu.Unlock()
	if s.id == "" || rejected {
		return
	}
	// Runs after ctx may have ended (a signal): still worth a short try.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(parent), 5*time.Second)
	defer cancel()
	req, err := r.newRequest(ctx, http.MethodDelete, nil, message{}, s)
	if err != nil {
		return
	}
	resp, err := r.b.client.Do(req)
	if err != nil {
		r.log.Debug("bridge: ending the session failed", "err", err)
		return
	}
	discard(resp)
	r.log.Debug("bridge: session ended", "status", resp.StatusCode)
}

// reject stops the bridge because the credential was refused.
func (r *relay) reject(err error) {
	r.mu.Lock()
	r.rejected = true
	r.mu.Unlock()
	r.fail(err)
}
