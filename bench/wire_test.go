package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// A wire keeps one connection across requests to any path on its server, reads
// chunked and sized answers whole, dials again after an answer that closes the
// connection, and sends a request again, once, when the server had closed the
// kept connection before the request reached it.
func TestWireKeepsOneConnection(t *testing.T) {
	var mu sync.Mutex
	conns := map[string]int{} // remote address → requests seen on it
	seen := []string{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		conns[r.RemoteAddr]++
		seen = append(seen, r.URL.Path)
		mu.Unlock()
		switch r.URL.Path {
		case "/chunked":
			for i := range 3 {
				fmt.Fprintf(w, "part%d;", i)
				w.(http.Flusher).Flush()
			}
		case "/close":
			w.Header().Set("Connection", "close")
			fmt.Fprint(w, "bye")
		default:
			fmt.Fprintf(w, "%s %s %s", r.Method, r.Header.Get("X-Test"), body)
		}
	}))
	defer srv.Close()
	w, err := newWire(srv.URL+"/ignored", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	ctx := context.Background()
	call := func(path, want string) {
		t.Helper()
		resp, data, err := w.do(ctx, http.MethodPost, path, []string{"X-Test", "h"}, []byte("b-"+path))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if resp.StatusCode != http.StatusOK || string(data) != want {
			t.Fatalf("%s: HTTP %d %q, want %q", path, resp.StatusCode, data, want)
		}
	}
	call("/a", "POST h b-/a")
	call("/b?x=1", "POST h b-/b?x=1")
	call("/chunked", "part0;part1;part2;")
	mu.Lock()
	if len(conns) != 1 {
		t.Fatalf("%d connections for 3 requests, want 1: %v", len(conns), conns)
	}
	mu.Unlock()

	call("/close", "bye")
	if w.conn != nil {
		t.Fatal("the wire kept a connection its answer closed")
	}
	call("/c", "POST h b-/c")
	mu.Lock()
	if len(conns) != 2 {
		t.Fatalf("%d connections after an answer that closed one, want 2: %v", len(conns), conns)
	}
	mu.Unlock()

	// The server drops the kept connection while it is idle.
	srv.CloseClientConnections()
	time.Sleep(50 * time.Millisecond)
	call("/d", "POST h b-/d")
	mu.Lock()
	defer mu.Unlock()
	if got := strings.Join(seen, " "); got != "/a /b /chunked /close /c /d" {
		t.Fatalf("the server saw %s", got)
	}
}

// A wire refuses a URL it cannot speak to.
func TestWireRefusesOtherSchemes(t *testing.T) {
	if _, err := newWire("ftp://example.com/", time.Second); err == nil {
		t.Fatal("an ftp URL was accepted")
	}
}
