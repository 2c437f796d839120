// Package testkit holds helpers that tests in more than one package need. Only
// tests import it, so none of it reaches the binary.
package testkit

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// WatchExit returns a channel closed when pid (any process, not only the test's
// child) terminates. It waits on a pidfd, an event rather than a poll of /proc;
// limit only bounds how long a broken test hangs.
func WatchExit(t testing.TB, pid int, limit time.Duration) <-chan struct{} {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		t.Fatalf("pidfd_open %d: %v", pid, err)
	}
	done := make(chan struct{})
	go func() {
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			n, err := unix.Poll(fds, int(limit.Milliseconds()))
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if n > 0 {
				close(done)
			}
			return
		}
	}()
	return done
}

// MeasureCalls runs b.N calls spread over the callers, each on its own
// goroutine, and reports per-call p50/p99 latency and throughput.
func MeasureCalls(b *testing.B, callers []func(context.Context) error) {
	ctx := context.Background()
	lat := make([]time.Duration, b.N)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, call := range callers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				t0 := time.Now()
				if err := call(ctx); err != nil {
					b.Error(err)
					return
				}
				lat[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "calls/s")
}

// StalledPost sends a POST to rawURL (http://) over its own connection, declaring
// a body of declared bytes but sending only sent, and then nothing. It returns the
// server's answer and whether the server closed the connection after it. limit
// bounds the wait for both; only a broken build reaches it, so make it generous.
func StalledPost(t testing.TB, rawURL string, h http.Header, declared int64, sent []byte, limit time.Duration) (
	resp *http.Response, body []byte, closed bool) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(limit))
	var req bytes.Buffer
	fmt.Fprintf(&req, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n", u.RequestURI(), u.Host, declared)
	h.Write(&req)
	req.WriteString("\r\n")
	req.Write(sent)
	if _, err := conn.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer within %s to a POST whose body stalled: %v", limit, err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("reading the answer: %v", err)
	}
	// A closed connection reads EOF (or a reset); an open one, the deadline.
	_, err = br.ReadByte()
	var ne net.Error
	closed = err != nil && !(errors.As(err, &ne) && ne.Timeout())
	return resp, body, closed
}

// LockedBuffer is a bytes.Buffer that goroutines may write into at once: a
// server's log, read by the test.
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
