package httpbody

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

const short = 200 * time.Millisecond

// A route that never reads its body (a 404, a 405) must not be held open while
// net/http drains the body after the handler: Bound gives every body a deadline.
func TestBoundEndsAnUnreadStalledBody(t *testing.T) {
	ignores := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "no such route", http.StatusNotFound)
	})
	srv := httptest.NewServer(Bound(ignores, short))
	defer srv.Close()
	resp, _, closed := testkit.StalledPost(t, srv.URL+"/nowhere", http.Header{"Content-Type": {"text/plain"}},
		1000, []byte("x"), 10*time.Second)
	if resp.StatusCode != http.StatusNotFound || !closed {
		t.Fatalf("stalled body to a route that ignores it: %d, connection closed %v", resp.StatusCode, closed)
	}
}

// Once a body is read to its end the deadline is gone: a handler that then waits
// longer than it (a store write, a streamed answer) is not cancelled.
func TestBoundDoesNotCutAHandlerThatReadItsBody(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, status := Read(w, r, 1<<20, short)
		if status != 0 {
			http.Error(w, "read", status)
			return
		}
		select {
		case <-time.After(3 * short):
		case <-r.Context().Done():
			http.Error(w, "cancelled while waiting", http.StatusInternalServerError)
			return
		}
		w.Write(body)
	})
	srv := httptest.NewServer(Bound(h, short))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{"ok":true}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != `{"ok":true}` {
		t.Fatalf("%d %q", resp.StatusCode, got)
	}
}

// ParseForm reads the body whatever its Content-Type (r.ParseForm alone reads
// nothing of text/plain or multipart, leaving it to stall), and a form that is in
// but malformed is a 400 that leaves the request alive.
func TestParseForm(t *testing.T) {
	var ctxErr error
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status := ParseForm(w, r, 1<<10, short)
		ctxErr = r.Context().Err()
		if status != 0 {
			http.Error(w, "form", status)
			return
		}
		io.WriteString(w, r.PostForm.Get("a"))
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, ct := range []string{"text/plain", "multipart/form-data; boundary=x", "application/x-www-form-urlencoded"} {
		resp, _, closed := testkit.StalledPost(t, srv.URL, http.Header{"Content-Type": {ct}}, 1000, []byte("a="), 10*time.Second)
		if resp.StatusCode != http.StatusRequestTimeout || !closed {
			t.Errorf("%s stalled: %d, connection closed %v", ct, resp.StatusCode, closed)
		}
	}
	resp, err := http.PostForm(srv.URL, url.Values{"a": {"b"}})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != "b" {
		t.Fatalf("a good form: %d %q", resp.StatusCode, got)
	}
	resp, err = http.Post(srv.URL, "application/x-www-form-urlencoded", strings.NewReader("a=%zz"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || ctxErr != nil {
		t.Fatalf("a malformed form: %d, request context %v", resp.StatusCode, ctxErr)
	}
	// Declared over the bound: refused before reading, and not waited for.
	resp, _, closed := testkit.StalledPost(t, srv.URL, http.Header{"Content-Type": {"application/x-www-form-urlencoded"}},
		2<<10, []byte("a"), 10*time.Second)
	if resp.StatusCode != http.StatusRequestEntityTooLarge || !closed || ctxErr != nil {
		t.Fatalf("a form declared over the bound: %d, closed %v, context %v", resp.StatusCode, closed, ctxErr)
	}
	resp, err = http.Post(srv.URL, "application/x-www-form-urlencoded", strings.NewReader(strings.Repeat("a", 2<<10)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Fatalf("an oversized form: %d", resp.StatusCode)
	}
}

// Over HTTP/2 an expired deadline closes a body for good, and HTTP/2 never drains
// a body after the handler anyway: Guard leaves it alone, so the body still reads.
func TestGuardLeavesHTTP2Alone(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		Guard(w, r)
		body, status := Read(w, r, 1<<20, short)
		if status != 0 {
			http.Error(w, "read", status)
			return
		}
		io.WriteString(w, r.Proto+" "+string(body))
	})
	srv := httptest.NewUnstartedServer(h)
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()
	// The body comes after the handler has started (and guarded), as a slow
	// client's would.
	pr, pw := io.Pipe()
	go func() {
		time.Sleep(short / 4)
		io.WriteString(pw, "hello")
		pw.Close()
	}()
	resp, err := srv.Client().Post(srv.URL, "text/plain", pr)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(got) != "HTTP/2.0 hello" {
		t.Fatalf("%d %q", resp.StatusCode, got)
	}
}
