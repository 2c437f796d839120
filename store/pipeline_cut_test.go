package store

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
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
	p := &cutProxy{}
	p.addr = loopbackProxy(t, upstream, func(client, server net.Conn) (toServer, toClient func()) {
		return func() { io.Copy(server, client); server.Close() }, func() { p.serve(client, server) }
	})
	return p
}

// openThroughProxy opens a store on a fresh schema whose connections go through
// the proxy newProxy starts in front of the server (it returns the proxy's
// address); the store is closed when the test ends.
func openThroughProxy(t *testing.T, newProxy func(upstream string) string) *Store {
	t.Helper()
	u, err := url.Parse(testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.Host = newProxy(u.Host)
	s, err := Open(context.Background(), u.String(), Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// loopbackProxy listens on loopback until the test ends, dials upstream for
// each connection it accepts, and runs the two directions pipe gives for the
// pair, each on a goroutine of its own; it returns its address.
func loopbackProxy(t *testing.T, upstream string, pipe func(client, server net.Conn) (toServer, toClient func())) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
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
			toServer, toClient := pipe(c, u)
			wg.Add(2)
			go func() { defer wg.Done(); toServer() }()
			go func() { defer wg.Done(); toClient() }()
		}
	}()
	return ln.Addr().String()
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
	var p *cutProxy
	s := openThroughProxy(t, func(upstream string) string { p = newCutProxy(t, upstream); return p.addr })
	ctx := context.Background()
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

// A write that is not pipelined (an add) whose connection is cut after the
// server committed it is not run again either, though an add may be run again
// when a statement of the write before it fails: the todo is stored once, the
// add is told that it may have been committed, and the next add commits.
func TestAnAddCutAfterItsCommitIsStoredOnce(t *testing.T) {
	var p *cutProxy
	s := openThroughProxy(t, func(upstream string) string { p = newCutProxy(t, upstream); return p.addr })
	ctx := context.Background()
	addTodos(t, s, "inbox", 1)
	p.armed.Store(true)
	_, err := s.AddTodo(ctx, NewTodo{Queue: "cut", Payload: "once"})
	if !p.cut.Load() {
		t.Fatal("the proxy cut no commit")
	}
	if err == nil || !strings.Contains(err.Error(), "may have been committed") {
		t.Errorf("an add whose commit was never answered: %v; want it to say it may have been committed", err)
	}
	var stored int
	if err := s.rdb.QueryRow(`SELECT count(*) FROM todos WHERE queue = 'cut'`).Scan(&stored); err != nil || stored != 1 {
		t.Errorf("%d todos stored by one add (%v), want the one committed", stored, err)
	}
	if n := auditCount(t, s, "todo.add"); n != 2 {
		t.Errorf("%d add audit rows, want 2 (one before the cut, one cut)", n)
	}
	if _, err := s.AddTodo(ctx, NewTodo{Queue: "cut", Payload: "next"}); err != nil {
		t.Errorf("the next add: %v", err)
	}
}
