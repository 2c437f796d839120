package bridge

import (
	"context"
	"mime"
	"net/http"
	"time"

	"github.com/switchboardhq/switchboard/internal/sse"
)

// streamControl lets Run stop the notification stream and renewSession move it
// to a new session.
type streamControl struct {
	stop     context.CancelFunc
	done     chan struct{}
	dropConn context.CancelFunc // ends the current connection only
}

// startStream opens the session's notification stream (the GET of the
// Streamable HTTP transport) in the background, once per Run.
func (r *relay) startStream(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stream != nil {
		return
	}
	ctx, stop := context.WithCancel(ctx)
	sc := &streamControl{stop: stop, done: make(chan struct{})}
	r.stream = sc
	go func() {
		defer close(sc.done)
		r.listen(ctx, sc)
	}()
}

// stopStream closes the notification stream and waits for it to end.
func (r *relay) stopStream() {
	r.mu.Lock()
	sc := r.stream
	r.mu.Unlock()
	if sc == nil {
		return
	}
	sc.stop()
	<-sc.done
}

// reconnectStream drops the current connection so the stream reopens with the
// session as it is now.
func (r *relay) reconnectStream() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stream != nil && r.stream.dropConn != nil {
		r.stream.dropConn()
	}
}

// listen keeps the notification stream open until ctx ends: a dropped
// connection is reopened after a backoff that doubles while attempts fail, and
// with Last-Event-ID so that a server keeping an event history replays what was
// sent in between.
func (r *relay) listen(ctx context.Context, sc *streamControl) {
	delay := r.b.minBackoff
	for ctx.Err() == nil {
		connCtx, dropConn := context.WithCancel(ctx)
		r.mu.Lock()
		sc.dropConn = dropConn
		s, lastID := r.sess, r.lastEventID
		r.mu.Unlock()

		out := r.listenOnce(connCtx, s, lastID)
		dropConn()
		switch {
		case out.stop:
			return
		case out.renewed:
			delay = r.b.minBackoff
			continue // straight back, on the new session
		case out.connected:
			delay = r.b.minBackoff
		}
		if out.retry > 0 {
			delay = min(out.retry, r.b.maxBackoff)
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		delay = min(2*delay, r.b.maxBackoff)
	}
}

type streamOutcome struct {
	connected bool          // the server accepted the stream (it may have ended since)
	renewed   bool          // the session was renewed; reconnect now
	stop      bool          // do not reconnect
	retry     time.Duration // the server's SSE retry: hint
}

// listenOnce holds one connection of the notification stream and relays its
// messages to stdout until it ends.
func (r *relay) listenOnce(ctx context.Context, s session, lastID string) streamOutcome {
	req, err := r.newRequest(ctx, http.MethodGet, nil, message{}, s)
	if err != nil {
		r.log.Error("bridge: notification stream", "err", err)
		return streamOutcome{stop: true}
	}
	if lastID != "" {
		req.Header.Set(headerLastEventID, lastID)
	}
	resp, err := r.b.client.Do(req)
	if err != nil {
		if ctx.Err() == nil {
			r.log.Warn("bridge: notification stream: cannot reach the server", "err", err)
		}
		return streamOutcome{}
	}
	defer discard(resp)

	switch {
	case resp.StatusCode == http.StatusMethodNotAllowed:
		r.log.Info("bridge: the server offers no notification stream")
		return streamOutcome{stop: true}
	case resp.StatusCode == http.StatusUnauthorized:
		r.reject(ErrUnauthorized)
		return streamOutcome{stop: true}
	case resp.StatusCode == http.StatusNotFound && s.id != "":
		if err := r.renewSession(ctx, s.id, whyGone(resp)); err != nil {
			if ctx.Err() == nil {
				r.log.Warn("bridge: notification stream: renewing the session failed", "err", err)
			}
			return streamOutcome{}
		}
		return streamOutcome{renewed: true}
	case resp.StatusCode == http.StatusBadRequest && lastID != "":
		// The server no longer has the event we last saw. Start afresh: what
		// was missed is still in the queue, which is the ledger.
		r.log.Warn("bridge: notification stream: the server cannot resume; notifications may have been missed")
		r.mu.Lock()
		if r.lastEventID == lastID {
			r.lastEventID = ""
		}
		r.mu.Unlock()
		return streamOutcome{}
	case resp.StatusCode != http.StatusOK:
		r.log.Warn("bridge: notification stream refused", "status", resp.StatusCode)
		return streamOutcome{}
	}
	if mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mediaType != "text/event-stream" {
		r.log.Warn("bridge: notification stream is not an event stream", "content_type", mediaType)
		return streamOutcome{}
	}

	out := streamOutcome{connected: true}
	err = sse.Read(resp.Body, r.b.maxBytes, func(ev sse.Event) error {
		if ev.Retry > 0 {
			out.retry = ev.Retry
		}
		if ev.Name == "" || ev.Name == "message" {
			r.emit(ev.Data, message{})
		}
		if ev.ID != "" {
			r.mu.Lock()
			if r.sess.id == s.id {
				r.lastEventID = ev.ID
			}
			r.mu.Unlock()
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		r.log.Debug("bridge: notification stream dropped", "err", err)
	}
	return out
}
