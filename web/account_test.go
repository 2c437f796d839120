package web

import (
	"bufio"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// The Account page lists the operator's sessions, this browser's marked, and
// changes the password: the current one must be right, the new one given twice;
// every other session ends (its live updates at once) and this one stays.
func TestChangeOwnPassword(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	other, _ := f.login() // the same operator in another browser
	bob, err := f.st.CreateOperator(t.Context(), "bob", testPassword, "test")
	if err != nil {
		t.Fatal(err)
	}
	token, _, err := f.st.CreateWebSession(t.Context(), bob.ID, time.Hour, "bob's browser", "")
	if err != nil {
		t.Fatal(err)
	}
	bobs := &http.Cookie{Name: sessionCookie, Value: token}

	_, page := f.get("/", cookie)
	if !strings.Contains(page, `href="/account"`) {
		t.Fatal("the header does not link to the account page")
	}
	res, page := f.get("/account", cookie)
	if res.StatusCode != http.StatusOK || strings.Count(page, `data-label="Browser"`) != 2 ||
		strings.Count(page, "this browser</span>") != 1 || !strings.Contains(page, "Log out the other 1") ||
		strings.Contains(page, "bob&#39;s browser") {
		t.Fatalf("account page: %d\n%s", res.StatusCode, page)
	}

	change := func(current, next, confirm string) (*http.Response, string) {
		return f.post("/account/password", cookie, url.Values{csrfField: {csrf},
			"current": {current}, "new": {next}, "confirm": {confirm}})
	}
	for _, c := range []struct {
		current, next, confirm string
		status                 int
		says                   string
	}{
		{"wrong horse battery", "a new password", "a new password", http.StatusUnauthorized, "The current password is wrong"},
		{testPassword, "a new password", "a new passwort", http.StatusBadRequest, "repetition differ"},
		{testPassword, "short", "short", http.StatusBadRequest, "at least 8 characters"},
	} {
		res, page := change(c.current, c.next, c.confirm)
		if res.StatusCode != c.status || !strings.Contains(page, c.says) || !strings.Contains(page, "nothing was changed") {
			t.Fatalf("change %+v: %d\n%s", c, res.StatusCode, page)
		}
	}
	// Without the form's token nothing changes either.
	if res, _ := f.post("/account/password", cookie, url.Values{"current": {testPassword}, "new": {"a new password"},
		"confirm": {"a new password"}}); res.StatusCode != http.StatusForbidden {
		t.Fatalf("change without CSRF: %d", res.StatusCode)
	}
	if _, err := f.st.CheckPassword(t.Context(), "ana", testPassword); err != nil {
		t.Fatalf("a refused change changed the password: %v", err)
	}
	if res, _ := f.get("/", other); res.StatusCode != http.StatusOK {
		t.Fatalf("a refused change ended the other session: %d", res.StatusCode)
	}

	// This browser's stream ends too: its session goes on under a new token, which
	// its page reconnects with.
	ended := []*bufio.Reader{openStream(t, f, other), openStream(t, f, cookie)}
	kept := openStream(t, f, bobs)
	res = f.do(http.MethodPost, "/account/password", cookie, url.Values{csrfField: {csrf},
		"current": {testPassword}, "new": {"a new password"}, "confirm": {"a new password"}}, nil)
	renewed := sessionFrom(res)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/account" || renewed == nil || renewed.Value == cookie.Value {
		t.Fatalf("change: %d %q, session cookie %v", res.StatusCode, res.Header.Get("Location"), renewed)
	}
	if page := f.follow(res, renewed); !strings.Contains(page, "Password changed.") || !strings.Contains(page, "(1 other session)") ||
		strings.Contains(page, "Log out the other") || !strings.Contains(page, csrfToken(renewed.Value)) {
		t.Fatalf("after the change:\n%s", page)
	}
	f.addTodo("inbox", "{}")
	for _, r := range ended {
		streamEnds(t, r)
	}
	if name, _ := sseEvent(t, kept); name != "todo" {
		t.Fatalf("bob's stream heard %q", name)
	}
	// The session cookie from before the change, as a copy of it taken by someone
	// else would be, no longer works.
	for _, c := range []*http.Cookie{other, cookie} {
		if res, _ := f.get("/", c); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("a session token from before the change: %d", res.StatusCode)
		}
	}
	for _, c := range []*http.Cookie{renewed, bobs} {
		if res, _ := f.get("/", c); res.StatusCode != http.StatusOK {
			t.Fatalf("a kept session after the change: %d", res.StatusCode)
		}
	}
	if _, err := f.st.CheckPassword(t.Context(), "ana", "a new password"); err != nil {
		t.Fatalf("the new password: %v", err)
	}
	if rows := f.audited(store.OperatorActor(f.human.ID)); rows[0].Action != "human.password" || rows[0].Detail != "sessions ended=1" {
		t.Fatalf("audit %+v", rows[0])
	}
}

// Wrong current passwords are held back as failed logins are, per session: a
// session left open is no way to guess the password.
func TestChangePasswordIsThrottled(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	form := url.Values{csrfField: {csrf}, "current": {"wrong horse battery"}, "new": {"a new password"}, "confirm": {"a new password"}}
	for i := range throttleFree {
		if res, _ := f.post("/account/password", cookie, form); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d", i+1, res.StatusCode)
		}
	}
	res, page := f.post("/account/password", cookie, form)
	if res.StatusCode != http.StatusTooManyRequests || res.Header.Get("Retry-After") == "" || !strings.Contains(page, "Too many wrong passwords") {
		t.Fatalf("past the free failures: %d %q", res.StatusCode, res.Header.Get("Retry-After"))
	}
	// Each wrong password is audited, as a failed login is.
	denied := 0
	for _, row := range f.audited(store.OperatorActor(f.human.ID)) {
		if row.Action == "human.password" && row.Outcome == "denied" && row.Detail == "ip=127.0.0.1" {
			denied++
		}
	}
	if denied != throttleFree+1 {
		t.Fatalf("%d refused changes audited, want %d", denied, throttleFree+1)
	}
	// The right password waits too, until the lockout ends.
	form.Set("current", testPassword)
	if res, _ := f.post("/account/password", cookie, form); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("the right password during the lockout: %d", res.StatusCode)
	}
	f.clock.Add(throttleMax)
	if res, _ := f.post("/account/password", cookie, form); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("after the lockout: %d", res.StatusCode)
	}
}

// "Log out the other N" ends every other session of the operator and their
// streams; this one stays.
func TestEndOtherSessions(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	others := []*http.Cookie{}
	for range 2 {
		c, _ := f.login()
		others = append(others, c)
	}
	stream := openStream(t, f, others[0])
	kept := openStream(t, f, cookie)
	res := f.do(http.MethodPost, "/account/sessions/end-others", cookie, url.Values{csrfField: {csrf}}, nil)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("end others: %d", res.StatusCode)
	}
	if page := f.follow(res, cookie); !strings.Contains(page, "Logged out of 2 other sessions; this browser stays logged in.") {
		t.Fatalf("after ending the others:\n%s", page)
	}
	f.addTodo("inbox", "{}")
	streamEnds(t, stream)
	if name, _ := sseEvent(t, kept); name != "todo" {
		t.Fatalf("this browser's stream heard %q", name)
	}
	for i, c := range others {
		if res, _ := f.get("/", c); res.StatusCode != http.StatusSeeOther {
			t.Fatalf("other session %d: %d", i, res.StatusCode)
		}
	}
	if res, _ := f.get("/account", cookie); res.StatusCode != http.StatusOK {
		t.Fatalf("this session: %d", res.StatusCode)
	}
	if rows := f.audited(store.OperatorActor(f.human.ID)); rows[0].Action != "human.logout_others" || rows[0].Detail != "sessions ended=2" {
		t.Fatalf("audit %+v", rows[0])
	}
}

func TestBrowserName(t *testing.T) {
	for ua, want := range map[string]string{
		"Mozilla/5.0 (X11; Linux x86_64; rv:133.0) Gecko/20100101 Firefox/133.0":                                                                                  "Firefox on Linux",
		"Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36 Edg/131.0.0.0":                           "Edge on Windows",
		"Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Safari/537.36":                                   "Chrome on macOS",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.1 Mobile/15E148 Safari/604.1":                 "Safari on iPhone",
		"Mozilla/5.0 (Linux; Android 14; Pixel 8) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0.0.0 Mobile Safari/537.36":                                   "Chrome on Android",
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/131.0.0.0 Safari/537.36":                                           "Chrome on Linux",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) FxiOS/133.0 Mobile/15E148 Safari/605.1.15":               "Firefox on iPhone",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 18_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/18.0 EdgiOS/131.0 Mobile/15E148 Safari/605.1.15": "Edge on iPhone",
		"curl/8.5.0":           "curl",
		"":                     "unknown browser",
		"python-requests/2.32": "unknown browser",
	} {
		if got := browserName(ua); got != want {
			t.Errorf("browserName(%q) = %q, want %q", ua, got, want)
		}
	}
}

// The count the Account page offers is the count it reports: a session that had
// already expired is not one more browser logged out.
func TestEndOtherSessionsCountsLiveOnes(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	f.login()
	if _, _, err := f.st.CreateWebSession(t.Context(), f.human.ID, time.Minute, "test", ""); err != nil {
		t.Fatal(err)
	}
	f.clock.Add(2 * time.Minute)
	if _, page := f.get("/account", cookie); !strings.Contains(page, "Log out the other 1<") {
		t.Fatalf("account page:\n%s", page)
	}
	res := f.do(http.MethodPost, "/account/sessions/end-others", cookie, url.Values{csrfField: {csrf}}, nil)
	if page := f.follow(res, cookie); !strings.Contains(page, "Logged out of 1 other session;") {
		t.Fatalf("after ending the other one:\n%s", page)
	}
	if rows := f.audited(store.OperatorActor(f.human.ID)); rows[0].Detail != "sessions ended=1" {
		t.Fatalf("audit %+v", rows[0])
	}
}

// A refused form leaves the browser at its action's address; a GET there (Enter in
// the address bar, a history entry) goes back to the page the form was on.
func TestActionAddressesAnswerGETWithTheirPage(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, _ := f.login()
	for action, page := range map[string]string{
		"/account/password":        "/account",
		"/todos":                   "/",
		"/todos/7/retry":           "/todos/7",
		"/dead-letters/retry":      "/?state=failed",
		"/endpoints/3/revoke":      "/endpoints/3",
		"/webhook/2/rotate":        "/webhook/2",
		"/events/9/replay":         "/events/9",
		"/modules/git%20x/approve": "/modules",
	} {
		res, _ := f.get(action, cookie)
		if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != page {
			t.Errorf("GET %s: %d to %q, want 303 to %s", action, res.StatusCode, res.Header.Get("Location"), page)
		}
	}
}

// A new password ends every device cookie; the browser that changed it gets a
// new one, so its next login is still counted as the operator's browser.
func TestChangePasswordGivesANewDeviceCookie(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	res, _ := f.post("/account/password", cookie, url.Values{csrfField: {csrf}, "current": {testPassword},
		"new": {"a new password"}, "confirm": {"a new password"}})
	device := deviceFrom(res)
	if res.StatusCode != http.StatusSeeOther || device == nil || device.Path != "/login" {
		t.Fatalf("password change: %d, device cookie %+v", res.StatusCode, device)
	}
	for range throttleFree + 1 {
		f.tryLogin("ana", "wrong password", "", nil)
	}
	withDevice := http.Header{"Cookie": {device.Name + "=" + device.Value}}
	if res := f.tryLogin("ana", "a new password", "", withDevice); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("login with the cookie from the change, the address held back: %d", res.StatusCode)
	}
}
