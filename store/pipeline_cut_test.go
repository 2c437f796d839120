package store

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// cutProxy passes PostgreSQL's traffic through, and once armed, cuts the first
// connection whose server sends a COMMIT's completion: the server has committed,
// and the client never hears it.
type cutProxy struct {
	addr  string
	armed atomic.Bool
	cut   atomic.Bool
}

func newCutProxy(t *testing.T, upstream string) *cutProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(u, c); u.Close() }()
			wg.Add(1)
			go func() { defer wg.Done(); p.serve(c, u) }()
		}
	}()
	return p
}

// serve copies the server's bytes to the client until it cuts them.
func (p *cutProxy) serve(client, server net.Conn) {
	defer client.Close()
	defer server.Close()
	buf := make([]byte, 64<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && bytes.Contains(buf[:n], []byte("COMMIT\x00")) && p.armed.CompareAndSwap(true, false) {
			p.cut.Store(true)
			client.(*net.TCPConn).SetLinger(0) // a reset, as a network cut gives
			return
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// A pipelined batch whose connection is cut after the server committed it is
// not run again on a new connection: that would run each write twice (here a
// second claim of another todo for one ClaimNext). It fails as a whole, as a
// COMMIT whose answer was lost does (reconnect.go), and the next write commits.
func TestPipelinedBatchCutAfterItsCommitRunsOnce(t *testing.T) {
	u, err := url.Parse(testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	p := newCutProxy(t, u.Host)
	u.Host = p.addr
	ctx := context.Background()
	s, err := Open(ctx, u.String(), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addTodos(t, s, "inbox", 3)
	p.armed.Store(true)
	_, ok, err := s.ClaimNext(ctx, "agent:c", []string{"inbox"}, time.Minute)
	if !p.cut.Load() {
		t.Fatal("the proxy cut no commit")
	}
	if err == nil || ok {
		t.Errorf("a claim whose commit was never answered = %v, %v; want an error", ok, err)
	}
	var claimed int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM todos WHERE state = 'claimed'`).Scan(&claimed); err != nil || claimed != 1 {
		t.Errorf("%d todos claimed by one ClaimNext (%v), want the one committed", claimed, err)
	}
	if n := auditCount(t, s, "todo.claim_next"); n != 1 {
		t.Errorf("%d claim audit rows, want 1", n)
	}
	if _, ok, err := s.ClaimNext(ctx, "agent:c", []string{"inbox"}, time.Minute); err != nil || !ok {
		t.Errorf("the next claim = %v, %v; want a todo", ok, err)
	}
}
