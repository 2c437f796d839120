package web

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/internal/testkit/teststore"
	"github.com/switchboardhq/switchboard/store"
)

var loginTokenRE = regexp.MustCompile(`name="login_token" value="([^"]+)"`)

// loginForm fetches the login page and returns its login cookie and form token.
func (f *fixture) loginForm(hdr http.Header) (*http.Cookie, string) {
	f.t.Helper()
	res := f.do(http.MethodGet, "/login", nil, nil, hdr)
	body := readBody(f.t, res)
	m := loginTokenRE.FindStringSubmatch(body)
	if m == nil {
		f.t.Fatalf("login page has no form token:\n%s", body)
	}
	for _, c := range res.Cookies() {
		if c.Name == loginCookie {
			return c, m[1]
		}
	}
	f.t.Fatal("login page set no login cookie")
	return nil, ""
}

func (f *fixture) tryLogin(username, password, next string, hdr http.Header) *http.Response {
	f.t.Helper()
	lc, tok := f.loginForm(hdr)
	form := url.Values{"username": {username}, "password": {password}, "login_token": {tok}, "next": {next}}
	res := f.do(http.MethodPost, "/login", lc, form, hdr)
	readBody(f.t, res)
	return res
}

func sessionFrom(res *http.Response) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == sessionCookie && c.Value != "" {
			return c
		}
	}
	return nil
}

func TestFirstRunSaysHowToCreateAnOperator(t *testing.T) {
	firstRunCommand(t, teststore.Open(t, store.Options{Synchronous: store.SyncNormal}))
}

// On PostgreSQL the first-run command names the database without its password
// (masked it would not log in; the page needs no login), and says where the
// password goes.
func TestFirstRunOnPostgresShowsNoPassword(t *testing.T) {
	u, err := url.Parse(testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "pw-never-shown") // the test server trusts loopback
	body := firstRunCommand(t, teststore.OpenPath(t, u.String(), store.Options{}))
	if strings.Contains(body, "pw-never-shown") || strings.Contains(body, "xxxxx") || !strings.Contains(body, "PGPASSWORD") {
		t.Fatalf("first-run page on PostgreSQL:\n%s", body)
	}
}

// firstRunCommand checks that the login page of st, which has no operator,
// shows the command that makes one, naming st's database as it may be pasted;
// it returns the page.
func firstRunCommand(t *testing.T, st *store.Store) string {
	ui := New(st, Options{Logger: quietLog})
	defer ui.Close()
	f := &fixture{t: t, st: st, ui: ui}
	srv := newServerFor(t, ui)
	f.srv = srv
	res, body := f.get("/login", nil)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("status %d", res.StatusCode)
	}
	db, _ := st.PasteableDB()
	want := "switchboard operator create --username NAME --db " + html.EscapeString(db)
	if !strings.Contains(body, want) {
		t.Fatalf("first-run page does not show %q:\n%s", want, body)
	}
	if strings.Contains(body, `name="password"`) {
		t.Fatal("first-run page shows a password form no one can use")
	}
	return body
}

func TestLoginAndLogout(t *testing.T) {
	f := newFixture(t, Options{})
	res := f.tryLogin("ana", testPassword, "/audit?actor=human:1", nil)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/audit?actor=human:1" {
		t.Fatalf("login: status %d Location %q", res.StatusCode, res.Header.Get("Location"))
	}
	c := sessionFrom(res)
	if c == nil {
		t.Fatal("no session cookie")
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Secure || c.Path != "/" {
		t.Fatalf("cookie attributes: %+v", c)
	}
	res, body := f.get("/", c)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, ">ana<") {
		t.Fatalf("board after login: %d", res.StatusCode)
	}
	if rows := f.audited(store.OperatorActor(f.human.ID)); len(rows) == 0 || rows[0].Action != "human.login" {
		t.Fatalf("login not audited: %+v", rows)
	}
	csrf := csrfToken(c.Value)
	res, _ = f.post("/logout", c, url.Values{csrfField: {csrf}})
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/login?out=1" {
		t.Fatalf("logout: %d %q", res.StatusCode, res.Header.Get("Location"))
	}
	// The login page it goes to says so.
	if _, page := f.get("/login?out=1", nil); !strings.Contains(page, `<div class="flash ok" role="status">You are logged out.</div>`) {
		t.Fatalf("the login page after a logout does not say so:\n%s", page)
	}
	if res, _ := f.get("/", c); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("session still valid after logout: %d", res.StatusCode)
	}
}

func TestLoginRejects(t *testing.T) {
	f := newFixture(t, Options{})
	cases := []struct {
		name       string
		user, pass string
		next       string
		status     int
	}{
		{"wrong password", "ana", "wrong password", "", http.StatusUnauthorized},
		{"unknown user", "bob", testPassword, "", http.StatusUnauthorized},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res := f.tryLogin(tc.user, tc.pass, tc.next, nil)
			if res.StatusCode != tc.status || sessionFrom(res) != nil {
				t.Fatalf("status %d (cookie %v), want %d without a session", res.StatusCode, sessionFrom(res), tc.status)
			}
		})
	}
	rows, err := f.st.ListAudit(t.Context(), store.AuditFilter{Action: "human.login"})
	if err != nil {
		t.Fatal(err)
	}
	denied := 0
	for _, r := range rows {
		if r.Outcome == "denied" {
			denied++
			if strings.Contains(r.Detail, testPassword) || strings.Contains(r.Target, "wrong password") {
				t.Fatalf("audit row holds a password: %+v", r)
			}
		}
	}
	if denied != 2 {
		t.Fatalf("%d denied logins audited, want 2", denied)
	}

	// Without the login form's cookie (a cross-site form post) nothing is checked.
	form := url.Values{"username": {"ana"}, "password": {testPassword}, "login_token": {"whatever"}}
	res := f.do(http.MethodPost, "/login", nil, form, nil)
	readBody(t, res)
	if res.StatusCode != http.StatusForbidden || sessionFrom(res) != nil {
		t.Fatalf("login without the form cookie: %d", res.StatusCode)
	}
}

func TestLoginNextStaysOnSite(t *testing.T) {
	for next, want := range map[string]string{
		"/todos/3": "/todos/3", "//evil.example/x": "/", "/\\evil.example": "/", "https://evil.example": "/",
		"": "/", "/login": "/", "/\t/evil.example": "/", "/%09/evil.example": "/%09/evil.example",
		"/\n/evil.example": "/", "/x\\y": "/", "/\x7f/evil.example": "/", "/todos?queue=a%2Fb": "/todos?queue=a%2Fb",
	} {
		if got := safeNext(next); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", next, got, want)
		}
	}
}

func TestSecureCookie(t *testing.T) {
	https := http.Header{"X-Forwarded-Proto": {"https"}}
	t.Run("untrusted proxy header is ignored", func(t *testing.T) {
		f := newFixture(t, Options{})
		if c := sessionFrom(f.tryLogin("ana", testPassword, "", https)); c == nil || c.Secure {
			t.Fatalf("cookie %+v: Secure from an untrusted header", c)
		}
	})
	t.Run("trusted proxy says https", func(t *testing.T) {
		f := newFixture(t, Options{TrustProxy: true})
		if c := sessionFrom(f.tryLogin("ana", testPassword, "", https)); c == nil || !c.Secure {
			t.Fatalf("cookie %+v: want Secure behind a TLS proxy", c)
		}
	})
}

func TestLoginThrottling(t *testing.T) {
	f := newFixture(t, Options{})
	for i := 1; i <= throttleFree; i++ {
		if res := f.tryLogin("ana", "wrong password", "", nil); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: status %d, want 401", i, res.StatusCode)
		}
	}
	res := f.tryLogin("ana", "wrong password", "", nil)
	if res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("failure %d: status %d, want 429", throttleFree+1, res.StatusCode)
	}
	if ra, _ := strconv.Atoi(res.Header.Get("Retry-After")); ra != int(throttleBase.Seconds()) {
		t.Fatalf("Retry-After %q, want %v", res.Header.Get("Retry-After"), throttleBase.Seconds())
	}
	// While blocked even the right password is refused, unchecked.
	if res := f.tryLogin("ana", testPassword, "", nil); res.StatusCode != http.StatusTooManyRequests || sessionFrom(res) != nil {
		t.Fatalf("right password while blocked: %d", res.StatusCode)
	}
	// The block is per username and address: another username from here is unaffected.
	if res := f.tryLogin("bob", "x-wrong-pw", "", nil); res.StatusCode != http.StatusUnauthorized {
		t.Fatalf("other username: %d, want 401", res.StatusCode)
	}
	f.clock.Add(throttleBase)
	if res := f.tryLogin("ana", testPassword, "", nil); res.StatusCode != http.StatusSeeOther || sessionFrom(res) == nil {
		t.Fatalf("after the wait: %d, want a login", res.StatusCode)
	}
}

// fail is one wrong password by username from ip, as the login counts it: the
// wait it is refused with, or the wait its failure imposes.
func (t *throttle) fail(username, ip string) time.Duration {
	wait, try := t.begin(byAddress(username, ip))
	if try != nil {
		return try.failed()
	}
	return wait
}

// wait says how long username from ip must still wait before its next attempt.
func (t *throttle) wait(username, ip string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	return max(t.entries.wait(throttleKey(username, ip), now), t.entries.wait(networkKey(ip), now))
}

func TestThrottleBackoff(t *testing.T) {
	clk := testkit.NewClock(time.Unix(1e9, 0))
	th := newThrottle(clk.Now)
	want := []time.Duration{0, 0, 0, 2 * time.Second}
	for i, w := range want {
		if got := th.fail("ana", "10.0.0.1"); got != w {
			t.Fatalf("failure %d: wait %v, want %v", i+1, got, w)
		}
	}
	// Each wait over, the next failure doubles it.
	for _, w := range []time.Duration{4 * time.Second, 8 * time.Second, 16 * time.Second} {
		if wait, try := th.begin(byAddress("ana", "10.0.0.1")); try != nil || wait <= 0 {
			t.Fatalf("an attempt within the wait went ahead (wait %v)", wait)
		}
		clk.Add(w / 2)
		if got := th.fail("ana", "10.0.0.1"); got != w {
			t.Fatalf("failure after the wait: %v, want %v", got, w)
		}
	}
	for range 20 {
		clk.Add(throttleMax)
		th.fail("ana", "10.0.0.1")
	}
	if got := th.wait("ana", "10.0.0.1"); got != throttleMax {
		t.Fatalf("wait after many failures = %v, want the cap %v", got, throttleMax)
	}
	clk.Add(throttleMax)
	_, try := th.begin(byAddress("ana", "10.0.0.1"))
	try.succeeded()
	if e := th.entries[throttleKey("ana", "10.0.0.1")]; e != nil {
		t.Fatalf("a success left the pair's failures: %+v", e)
	}
	// A quiet hour forgets the failures.
	for range throttleFree + 1 {
		th.fail("bob", "10.0.0.2")
	}
	clk.Add(throttleForget + time.Second)
	if got := th.fail("bob", "10.0.0.2"); got != 0 {
		t.Fatalf("first failure after a quiet hour: wait %v, want 0", got)
	}
}

// Attempts sent together are counted as they start: no more than the free ones
// and one more reach the password check before the first has failed.
func TestThrottleCountsAttemptsAsTheyStart(t *testing.T) {
	th := newThrottle(testkit.NewClock(time.Unix(1e9, 0)).Now)
	var started []*attempt
	for range 40 {
		if _, try := th.begin(byAddress("ana", "10.0.0.1")); try != nil {
			started = append(started, try)
		}
	}
	if len(started) != throttleFree+1 {
		t.Fatalf("%d of 40 attempts sent together went ahead, want %d", len(started), throttleFree+1)
	}
	// Those given back (the server was busy) let as many through again.
	for _, try := range started {
		try.abandoned()
	}
	if _, try := th.begin(byAddress("ana", "10.0.0.1")); try == nil {
		t.Fatal("abandoned attempts were not given back")
	}
}

// A guesser trying many usernames from one network is held back too: past
// throttleNetworkFree failures, whatever the username; an IPv6 address stands for
// its /64. A success from the network gives its attempt back.
func TestThrottleCountsTheNetwork(t *testing.T) {
	clk := testkit.NewClock(time.Unix(1e9, 0))
	th := newThrottle(clk.Now)
	for i := range throttleNetworkFree {
		if wait := th.fail(fmt.Sprintf("user%d", i), "2001:db8::"+strconv.Itoa(i+1)); wait != 0 {
			t.Fatalf("failure %d from the /64: wait %v", i+1, wait)
		}
	}
	if wait := th.fail("another", "2001:db8::ffff"); wait != throttleBase {
		t.Fatalf("failure past the network's free ones: wait %v, want %v", wait, throttleBase)
	}
	if wait, try := th.begin(byAddress("ana", "2001:db8::1:2")); try != nil || wait <= 0 {
		t.Fatal("another username from the /64 went ahead during its wait")
	}
	if _, try := th.begin(byAddress("ana", "2001:db8:0:1::1")); try == nil {
		t.Fatal("the next /64 is held back with this one")
	}
	if _, try := th.begin(byAddress("ana", "192.0.2.7")); try == nil {
		t.Fatal("another address is held back")
	}
	// A success from 192.0.2.8 gives the network back its attempt.
	for i := range throttleNetworkFree - 1 {
		th.fail(fmt.Sprintf("user%d", i), "192.0.2.8")
	}
	_, try := th.begin(byAddress("ana", "192.0.2.8"))
	try.succeeded()
	if wait := th.fail("bob", "192.0.2.8"); wait != 0 {
		t.Fatalf("a success was not given back: the next failure waits %v", wait)
	}
}

// A guesser spraying keys cannot grow the count past its bound; what goes to make
// room are the entries idle the longest, not a key that failed recently.
func TestThrottleIsBounded(t *testing.T) {
	clk := testkit.NewClock(time.Unix(1e9, 0))
	th := newThrottle(clk.Now)
	for i := range throttleEntries + 50 {
		clk.Add(time.Millisecond)
		th.fail("u"+strconv.Itoa(i), "10.0."+strconv.Itoa(i/250)+"."+strconv.Itoa(i%250))
		if i == throttleEntries-10 { // spraying, 40 keys before its end
			for range throttleFree + 1 {
				th.fail("ana", "192.0.2.8") // waits from now on
			}
		}
	}
	if n := len(th.entries); n > throttleEntries {
		t.Fatalf("%d entries, bound %d", n, throttleEntries)
	}
	if _, ok := th.entries[throttleKey("u0", "10.0.0.0")]; ok {
		t.Fatal("the key idle the longest was kept")
	}
	newest := throttleEntries + 49
	if _, ok := th.entries[throttleKey("u"+strconv.Itoa(newest), "10.0."+strconv.Itoa(newest/250)+"."+strconv.Itoa(newest%250))]; !ok {
		t.Fatal("the newest key was evicted")
	}
	if th.wait("ana", "192.0.2.8") == 0 {
		t.Fatal("a key that failed while the spraying went on was evicted: its wait is gone")
	}
}

// Logins sent together are checked no faster than one by one: of 20 wrong
// passwords sent at once for one username, throttleFree+1 are checked (and
// audited), the rest refused unchecked.
func TestParallelLoginsAreThrottled(t *testing.T) {
	f := newFixture(t, Options{})
	// Each check the throttle lets through gets a slot at once. With the one slot
	// a 2-core machine has, under the race detector, the last of them waited past
	// hashWait for bcrypt's turn and was answered busy (503): that bound is the
	// slots' (TestHashSlotsBoundChecks), not the throttle's.
	f.ui.hashing = newHashSlots(throttleFree + 1)
	var wg sync.WaitGroup
	codes := make(chan int, 20)
	for range 20 {
		wg.Go(func() { codes <- f.tryLogin("ana", "wrong password", "", nil).StatusCode })
	}
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusTooManyRequests && c != http.StatusUnauthorized {
			t.Fatalf("a wrong password answered %d", c)
		}
	}
	denied := 0
	for _, row := range f.audited("username:ana") {
		if row.Action == "human.login" && row.Outcome == "denied" {
			denied++
		}
	}
	if denied != throttleFree+1 {
		t.Fatalf("%d of 20 wrong passwords sent together were checked, want %d", denied, throttleFree+1)
	}
}

// While every slot is checking a password, a login waits, and gives up with the
// request.
func TestHashSlotsBoundChecks(t *testing.T) {
	s := newHashSlots(1)
	release, ok := s.acquire(context.Background())
	if !ok {
		t.Fatal("a free slot was not taken")
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := s.acquire(ctx); ok {
		t.Fatal("a second check ran beside the first")
	}
	release()
	if _, ok := s.acquire(context.Background()); !ok {
		t.Fatal("a released slot was not free again")
	}
}

// A form body that stalls does not hold the connection: the login form is answered
// once the deadline passes, and a form to an action from someone not signed in is
// redirected without waiting for its body.
func TestStalledFormBodiesAreNotWaitedFor(t *testing.T) {
	f := newFixture(t, Options{BodyTimeout: 200 * time.Millisecond})
	form := http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}
	resp, _, closed := testkit.StalledPost(t, f.srv.URL+"/login", form, 4096, []byte("username=ana&pass"), 10*time.Second)
	if resp.StatusCode != http.StatusRequestTimeout || !closed {
		t.Fatalf("stalled login form: %d, connection closed %v", resp.StatusCode, closed)
	}
	resp, _, closed = testkit.StalledPost(t, f.srv.URL+"/todos/1/release", form, 1<<20, []byte("csrf="), 10*time.Second)
	if resp.StatusCode != http.StatusSeeOther || !closed {
		t.Fatalf("stalled action form without a session: %d, connection closed %v", resp.StatusCode, closed)
	}
	// Signed in, the action's stalled form is answered at the deadline too.
	cookie, _ := f.login()
	signed := form.Clone()
	signed.Set("Cookie", cookie.String())
	resp, _, closed = testkit.StalledPost(t, f.srv.URL+"/todos/1/release", signed, 4096, []byte("csrf="), 10*time.Second)
	if resp.StatusCode != http.StatusRequestTimeout || !closed {
		t.Fatalf("stalled action form, signed in: %d, connection closed %v", resp.StatusCode, closed)
	}
}

// A new password set from the CLI (another handle on the database) shuts out the
// old password and every session made with it; the new one logs in.
func TestNewPasswordEndsEverySession(t *testing.T) {
	f := newFixture(t, Options{})
	var sessions []*http.Cookie
	for range 2 {
		res := f.tryLogin("ana", testPassword, "/", nil)
		if c := sessionFrom(res); c != nil {
			sessions = append(sessions, c)
		}
	}
	if len(sessions) != 2 {
		t.Fatalf("%d sessions from two logins", len(sessions))
	}
	cli := teststore.OpenPath(t, f.st.Path(), store.Options{Now: f.clock.Now})
	_, ended, err := cli.SetPassword(context.Background(), "ana", "a new password", "human:cli")
	cli.Close()
	if err != nil || ended != 2 {
		t.Fatalf("set password: %d sessions ended, %v", ended, err)
	}
	for i, c := range sessions {
		if res, _ := f.get("/", c); res.StatusCode != http.StatusSeeOther ||
			!strings.HasPrefix(res.Header.Get("Location"), "/login") {
			t.Fatalf("session %d after the new password: %d %q", i, res.StatusCode, res.Header.Get("Location"))
		}
	}
	if c := sessionFrom(f.tryLogin("ana", testPassword, "/", nil)); c != nil {
		t.Fatal("the old password still logs in")
	}
	if c := sessionFrom(f.tryLogin("ana", "a new password", "/", nil)); c == nil {
		t.Fatal("the new password does not log in")
	}
}

// A browser whose session ended elsewhere (logged out from another browser, a
// new password) is told so at the login page, and that a form it sent was not
// acted on; one that never had a session is just asked to log in.
func TestLoginSaysTheSessionEnded(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	td := f.claimed("inbox")
	if _, _, err := f.st.EndSessions(t.Context(), "ana", "human:cli"); err != nil {
		t.Fatal(err)
	}
	res, _ := f.get("/?state=claimed", cookie)
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(loc, "/login?next=") || !strings.HasSuffix(loc, "&ended=page") {
		t.Fatalf("a page after the session ended: %d %q", res.StatusCode, loc)
	}
	if _, page := f.get(loc, nil); !strings.Contains(page, "Your session has ended") {
		t.Fatalf("the login page does not say the session ended:\n%s", page)
	}
	res = f.do(http.MethodPost, fmt.Sprintf("/todos/%d/release", td.ID), cookie, url.Values{csrfField: {csrf}}, nil)
	if loc := res.Header.Get("Location"); res.StatusCode != http.StatusSeeOther || loc != "/login?ended=form" {
		t.Fatalf("a form after the session ended: %d %q", res.StatusCode, loc)
	}
	if _, page := f.get("/login?ended=form", nil); !strings.Contains(page, "so nothing was done") {
		t.Fatalf("the login page does not say the form was not acted on:\n%s", page)
	}
	if f.todo(td.ID).State != store.StateClaimed {
		t.Fatal("the form was acted on")
	}
	if res, _ := f.get("/", nil); strings.Contains(res.Header.Get("Location"), "ended") {
		t.Fatalf("a browser with no session is told one ended: %q", res.Header.Get("Location"))
	}
}

// deviceFrom is the device cookie a login answer set.
func deviceFrom(res *http.Response) *http.Cookie {
	for _, c := range res.Cookies() {
		if c.Name == deviceCookie {
			return c
		}
	}
	return nil
}

// Guessers who share the operator's address, failing for made-up names or for the
// operator's own, hold that address back, but not the browser where the operator
// logged in before (its device cookie), whose attempts count against its own nonce.
func TestDeviceCookieKeepsTheOperatorIn(t *testing.T) {
	f := newFixture(t, Options{})
	device := deviceFrom(f.tryLogin("ana", testPassword, "", nil))
	if device == nil || !device.HttpOnly || device.Path != "/login" || device.MaxAge < 300*24*3600 {
		t.Fatalf("device cookie after a login: %+v", device)
	}
	withDevice := http.Header{"Cookie": {device.Name + "=" + device.Value}}
	// A spray of made-up names, then failures for ana herself, from her address.
	for i := range throttleNetworkFree + 1 {
		f.tryLogin(fmt.Sprintf("nobody%d", i), "wrong password", "", nil)
	}
	for range throttleFree + 1 {
		f.tryLogin("ana", "wrong password", "", nil)
	}
	if res := f.tryLogin("ana", testPassword, "", nil); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a browser without the cookie: %d, want 429", res.StatusCode)
	}
	res := f.tryLogin("ana", testPassword, "", withDevice)
	if res.StatusCode != http.StatusSeeOther || sessionFrom(res) == nil {
		t.Fatalf("the operator's browser: %d, want a login", res.StatusCode)
	}
	if again := deviceFrom(res); again == nil || strings.Split(again.Value, ".")[0] != strings.Split(device.Value, ".")[0] {
		t.Fatalf("a login with the cookie minted another device: %+v", again)
	}
	// For another username it is no cookie, and a forged one is none either.
	if res := f.tryLogin("bob", "x-wrong-pw", "", withDevice); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("another username with ana's cookie: %d, want 429", res.StatusCode)
	}
	nonce := strings.Split(device.Value, ".")[0]
	forged := http.Header{"Cookie": {deviceCookie + "=" + nonce + "." + deviceMAC([]byte("not the key"), "ana", nonce, "x")}}
	if res := f.tryLogin("ana", testPassword, "", forged); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a forged device cookie: %d, want 429", res.StatusCode)
	}
	// A new password ends every device cookie.
	if _, _, err := f.st.SetPassword(t.Context(), "ana", "another good password", "human:cli"); err != nil {
		t.Fatal(err)
	}
	if res := f.tryLogin("ana", "another good password", "", withDevice); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a device cookie from before a new password: %d, want 429 (counted by address)", res.StatusCode)
	}
}

// A device cookie guesses no faster from many addresses than from one: its
// attempts count against the device, whatever the address.
func TestDeviceCookieIsLimitedAcrossAddresses(t *testing.T) {
	f := newFixture(t, Options{TrustProxy: true})
	from := func(ip string, extra ...string) http.Header {
		return http.Header{"X-Forwarded-For": {ip}, "Cookie": extra}
	}
	device := deviceFrom(f.tryLogin("ana", testPassword, "", from("2001:db8::1")))
	if device == nil {
		t.Fatal("no device cookie")
	}
	cookie := device.Name + "=" + device.Value
	for i := range throttleFree {
		if res := f.tryLogin("ana", "wrong password", "", from(fmt.Sprintf("2001:db8::%x", i+2), cookie)); res.StatusCode != http.StatusUnauthorized {
			t.Fatalf("guess %d with the cookie: %d, want 401", i+1, res.StatusCode)
		}
	}
	if res := f.tryLogin("ana", "wrong password", "", from("2001:db8::99", cookie)); res.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("guess past the device's free ones, from yet another address: %d, want 429", res.StatusCode)
	}
}

func TestWaitText(t *testing.T) {
	for secs, want := range map[int]string{1: "1 second", 64: "64 seconds", 120: "120 seconds", 121: "3 minutes", 900: "15 minutes"} {
		if got := waitText(secs); got != want {
			t.Errorf("waitText(%d) = %q, want %q", secs, got, want)
		}
	}
}
