package store

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// freezeProxy passes PostgreSQL's traffic through until frozen; then it holds
// every byte, both ways, on connections it keeps open, as a server whose host
// froze does, until thawed.
type freezeProxy struct {
	addr string
	mu   sync.Mutex
	thaw chan struct{} // nil while traffic flows; closed to thaw
}

func newFreezeProxy(t *testing.T, upstream string) *freezeProxy {
	p := &freezeProxy{}
	p.addr = loopbackProxy(t, upstream, func(client, server net.Conn) (toServer, toClient func()) {
		return func() { p.relay(server, client) }, func() { p.relay(client, server) }
	})
	t.Cleanup(p.unfreeze) // runs before the proxy's own cleanup waits for its relays
	return p
}

// relay copies from src to dst, holding each read while frozen.
func (p *freezeProxy) relay(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		p.mu.Lock()
		thaw := p.thaw
		p.mu.Unlock()
		if thaw != nil {
			<-thaw
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *freezeProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thaw == nil {
		p.thaw = make(chan struct{})
	}
}

func (p *freezeProxy) unfreeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.thaw != nil {
		close(p.thaw)
		p.thaw = nil
	}
}

// A server that stops answering without closing its connections is
// unreachable to Ping, as a stopped one is, so that the systemd watchdog goes
// on being fed (a restart would not bring the server back); once it answers
// again, so does Ping.
func TestPingCallsAFrozenServerUnreachable(t *testing.T) {
	var p *freezeProxy
	s := openThroughProxy(t, func(upstream string) string { p = newFreezeProxy(t, upstream); return p.addr })
	ctx := context.Background()
	if err := s.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	p.freeze()
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err := s.Ping(pctx)
	cancel()
	if !errors.Is(err, ErrUnreachable) {
		t.Fatalf("Ping of a frozen server: %v, want ErrUnreachable", err)
	}
	p.unfreeze()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping once the server answers again: %v", err)
	}
}

// Every read connection busy is this process's trouble, not the server's:
// Ping says so, and the watchdog may restart serve.
func TestPingOfABusyReadPoolIsNotUnreachable(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, testkit.PostgresURL(t), Options{ReadConns: 1, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	held, err := s.rdb.Conn(ctx) // as a reader that never gives it back would
	if err != nil {
		t.Fatal(err)
	}
	pctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = s.Ping(pctx)
	cancel()
	if err == nil || errors.Is(err, ErrUnreachable) {
		t.Fatalf("Ping with every read connection held: %v, want an error that is not ErrUnreachable", err)
	}
	held.Close()
	if err := s.Ping(ctx); err != nil {
		t.Fatalf("Ping once the connection is back: %v", err)
	}
}
