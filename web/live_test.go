package web

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// sseEvent reads the next event (name and data) from an event stream.
func sseEvent(t *testing.T, r *bufio.Reader) (name, data string) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read event stream: %v", err)
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "" && name != "":
			return name, data
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			data = strings.TrimPrefix(line, "data: ")
		}
	}
}

func TestLiveStreamAnnouncesNewTodos(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	// A generous bound so a broken stream fails the test instead of hanging it;
	// nothing is timed.
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/live", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.AddCookie(cookie)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("status %d, Content-Type %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	r := bufio.NewReader(res.Body)
	if name, _ := sseEvent(t, r); name != "ready" {
		t.Fatalf("first event %q, want ready", name)
	}
	// The subscription exists once "ready" was sent, so this change is seen.
	td := f.addTodo("inbox", `{"secret":"do not stream me"}`)
	name, data := sseEvent(t, r)
	if name != "todo" {
		t.Fatalf("event %q, want todo", name)
	}
	var ev liveEvent
	if err := json.Unmarshal([]byte(data), &ev); err != nil {
		t.Fatal(err)
	}
	if ev.ID != td.ID || ev.Queue != "inbox" || ev.State != "pending" || ev.From == nil || *ev.From != "" {
		t.Fatalf("event %s", data)
	}
	// A claim says which state the todo left, so a page of pending todos knows to
	// redraw.
	if _, err := f.st.Claim(t.Context(), store.Ack{ID: td.ID, Owner: "agent:a"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	if _, data = sseEvent(t, r); data != fmt.Sprintf(`{"id":%d,"queue":"inbox","state":"claimed","from":"pending"}`, td.ID) {
		t.Fatalf("claim event %s", data)
	}
	if strings.Contains(data, "secret") {
		t.Fatal("the event carries the payload")
	}
	// Closing the board ends the stream (so server shutdown does not wait on it).
	f.ui.Close()
	for {
		if _, err := r.ReadString('\n'); err != nil {
			break
		}
	}
}

func TestBroadcasterNeverBlocks(t *testing.T) {
	b := newBroadcaster()
	defer b.close()
	ch, cancel, ok := b.subscribe()
	if !ok {
		t.Fatal("subscribe refused")
	}
	defer cancel()
	// Nobody reads ch: publishing far past its buffer, and past the broadcaster's
	// own, must still return.
	for i := range cap(b.in) * 4 {
		b.publish(store.TodoChange{ID: int64(i)})
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(ch) < cap(ch) {
		if time.Now().After(deadline) {
			t.Fatalf("buffered %d, want %d", len(ch), cap(ch))
		}
		time.Sleep(time.Millisecond)
	}
	if first := <-ch; first.ID != 0 {
		t.Fatalf("first change %d, want 0 (later ones are the ones dropped)", first.ID)
	}
}

// Every open stream hears a change, each from the broadcaster's goroutine.
func TestBroadcasterReachesEveryStream(t *testing.T) {
	b := newBroadcaster()
	defer b.close()
	var chans []chan store.TodoChange
	for range 3 {
		ch, cancel, ok := b.subscribe()
		if !ok {
			t.Fatal("subscribe refused")
		}
		defer cancel()
		chans = append(chans, ch)
	}
	b.publish(store.TodoChange{ID: 42})
	for i, ch := range chans {
		select {
		case c := <-ch:
			if c.ID != 42 {
				t.Fatalf("stream %d heard %d", i, c.ID)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("stream %d heard nothing", i)
		}
	}
}

func TestBroadcasterBoundsStreams(t *testing.T) {
	b := newBroadcaster()
	defer b.close()
	for range maxStreams {
		if _, _, ok := b.subscribe(); !ok {
			t.Fatal("refused below the bound")
		}
	}
	if _, _, ok := b.subscribe(); ok {
		t.Fatal("accepted past the bound")
	}
	b.close()
	select {
	case <-b.done:
	default:
		t.Fatal("close did not signal")
	}
}

// openStream opens GET /live with cookie and reads its "ready" event.
func openStream(t *testing.T, f *fixture, cookie *http.Cookie) *bufio.Reader {
	t.Helper()
	// A generous bound so a stream that never ends fails the test instead of
	// hanging it; nothing is timed.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, f.srv.URL+"/live", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.AddCookie(cookie)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { res.Body.Close() })
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	r := bufio.NewReader(res.Body)
	if name, _ := sseEvent(t, r); name != "ready" {
		t.Fatalf("first event %q, want ready", name)
	}
	return r
}

// streamEnds reads the stream to its end: the server must close it before the
// stream's bound runs out.
func streamEnds(t *testing.T, r *bufio.Reader) {
	t.Helper()
	for {
		line, err := r.ReadString('\n')
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("the stream did not end: %v", err)
		}
		if strings.HasPrefix(line, "event: todo") {
			t.Fatalf("the stream still sends todo events")
		}
	}
}

// A stream open when its session logs out ends: it was checked only when it
// connected, and kept sending events to a browser no longer logged in.
func TestLiveStreamEndsAtLogout(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	other, _ := f.login() // the same human in another browser
	r := openStream(t, f, cookie)
	kept := openStream(t, f, other)
	res, _ := f.post("/logout", cookie, url.Values{csrfField: {csrf}})
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", res.StatusCode)
	}
	f.addTodo("inbox", "{}")
	streamEnds(t, r)
	// The other session's stream goes on.
	if name, _ := sseEvent(t, kept); name != "todo" {
		t.Fatalf("the other session's stream heard %q", name)
	}
}

// A stream whose session expires (or is deleted by another process) ends at its
// next session check.
func TestLiveStreamEndsWhenTheSessionExpires(t *testing.T) {
	f := newFixture(t, Options{})
	f.ui.sessionCheck = 10 * time.Millisecond
	cookie, _ := f.login()
	r := openStream(t, f, cookie) // which slides the session's end to a week away
	f.clock.Add(8 * 24 * time.Hour)
	streamEnds(t, r)
}

// Logging out everywhere ends every session of the human, in every browser, and
// their streams at once; another human's session and stream go on.
func TestLogoutEverywhere(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	other, _ := f.login() // the same human in another browser
	bob, err := f.st.CreateOperator(t.Context(), "bob", testPassword, "test")
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := f.st.CreateWebSession(t.Context(), bob.ID, time.Hour, "test", "")
	if err != nil {
		t.Fatal(err)
	}
	bobs := &http.Cookie{Name: sessionCookie, Value: token}
	_, page := f.get("/", cookie)
	if !strings.Contains(page, `action="/logout/everywhere"`) {
		t.Fatal("the header offers no way to log out everywhere")
	}
	streams := []*bufio.Reader{openStream(t, f, cookie), openStream(t, f, other)}
	kept := openStream(t, f, bobs)
	res, _ := f.post("/logout/everywhere", cookie, url.Values{csrfField: {csrf}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login?out=everywhere" {
		t.Fatalf("logout everywhere: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	f.addTodo("inbox", "{}")
	for _, r := range streams {
		streamEnds(t, r)
	}
	for i, c := range []*http.Cookie{cookie, other} {
		if res, _ := f.get("/", c); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("ana's session %d after logging out everywhere: %d", i, res.StatusCode)
		}
	}
	if name, _ := sseEvent(t, kept); name != "todo" {
		t.Fatalf("bob's stream heard %q", name)
	}
	if res, _ := f.get("/", bobs); res.StatusCode != http.StatusOK {
		t.Fatalf("bob's session after ana logged out everywhere: %d", res.StatusCode)
	}
	if rows := f.audited(store.OperatorActor(f.human.ID)); rows[0].Action != "human.logout_all" || rows[0].Detail != "sessions ended=2" {
		t.Fatalf("audit %+v", rows[0])
	}
}
