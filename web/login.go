package web

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/internal/httpbody"
	"github.com/switchboardhq/switchboard/internal/textcut"
	"github.com/switchboardhq/switchboard/store"
)

// loginCookie carries the login form's CSRF token (double submit): there is no
// session yet to derive one from, and without it another site could log a visitor
// into an account of the attacker's choosing.
const loginCookie = "sb_login"

type loginPage struct {
	Username    string
	Next        string
	Token       string
	NoOperators bool
	DBPath      string // as it may be pasted (store.PasteableDB)
	DBPassword  bool   // DBPath leaves out a password, for PGPASSWORD or ~/.pgpass to give
}

func (u *UI) loginPage(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	switch _, err := u.session(w, r); {
	case err == nil:
		http.Redirect(w, r, safeNext(r.URL.Query().Get("next")), http.StatusSeeOther)
		return
	case !errors.Is(err, errNoSession):
		u.storeDown(w, r)
		return
	}
	msg := ""
	switch r.URL.Query().Get("ended") {
	case "page":
		msg = "Your session has ended (logged out from another browser, a new password, or it expired). Log in again."
	case "form":
		msg = "Your session ended before that form was sent, so nothing was done. Log in and try again."
	}
	u.showLogin(w, r, http.StatusOK, r.URL.Query().Get("next"), "", msg)
}

func (u *UI) showLogin(w http.ResponseWriter, r *http.Request, status int, next, username, msg string) {
	n, err := u.store.CountOperators(r.Context())
	if err != nil {
		u.log.Error("web: count humans", "err", err)
		u.storeDown(w, r)
		return
	}
	token := ""
	if c, err := r.Cookie(loginCookie); err == nil && len(c.Value) == 43 {
		token = c.Value
	} else {
		token = randomToken()
		http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: token, Path: "/login", MaxAge: 3600,
			HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: u.secure(r)})
	}
	// After a logout the page says so (a bare login page looked like nothing
	// had happened).
	notice := ""
	if r.Method == http.MethodGet {
		notice = loggedOut[r.URL.Query().Get("out")]
	}
	db, withoutPassword := u.store.PasteableDB()
	u.render(w, r, nil, status, "login", view{Title: "Log in", Flash: notice, Error: msg, Page: loginPage{
		Username: username, Next: safeNext(next), Token: token, NoOperators: n == 0,
		DBPath: db, DBPassword: withoutPassword,
	}})
}

func (u *UI) login(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	if status := httpbody.ParseForm(w, r, 16<<10, u.opts.BodyTimeout); status != 0 {
		http.Error(w, "the login form could not be read", status)
		return
	}
	username := strings.TrimSpace(r.PostForm.Get("username"))
	password := r.PostForm.Get("password")
	next := r.PostForm.Get("next")
	c, err := r.Cookie(loginCookie)
	if err != nil || subtle.ConstantTimeCompare([]byte(c.Value), []byte(r.PostForm.Get("login_token"))) != 1 {
		u.showLogin(w, r, http.StatusForbidden, next, username,
			"The login form expired or did not come from this board. Please try again.")
		return
	}
	ip := u.clientIP(r)
	keys, device := byAddress(username, ip), u.trustedDevice(r, username)
	if device != "" {
		keys = byDevice(device)
	}
	wait, try := u.throttle.begin(keys)
	if wait > 0 {
		u.tooMany(w, r, next, username, wait)
		return
	}
	release, ok := u.hashing.acquire(r.Context())
	if !ok {
		try.abandoned()
		w.Header().Set("Retry-After", strconv.Itoa(int(hashWait.Seconds())))
		u.showLogin(w, r, http.StatusServiceUnavailable, next, username,
			"The server is busy checking other logins. Try again in a few seconds.")
		return
	}
	h, err := u.store.CheckPassword(r.Context(), username, password)
	release()
	if errors.Is(err, store.ErrBadPassword) {
		u.loginDenied(w, r, try, next, username, ip)
		return
	}
	if err != nil {
		try.abandoned()
		u.log.Error("web: check password", "err", err)
		u.showLogin(w, r, http.StatusInternalServerError, next, username, "The login could not be checked; the server log has the details.")
		return
	}
	token, _, err := u.store.LogIn(r.Context(), h, u.opts.SessionTTL, r.UserAgent(), "ip="+ip)
	if errors.Is(err, store.ErrBadPassword) {
		// Its password was changed or reset since it was checked: a wrong one now.
		u.loginDenied(w, r, try, next, username, ip)
		return
	}
	if err != nil {
		try.abandoned()
		u.log.Error("web: create session", "err", err)
		u.showLogin(w, r, http.StatusInternalServerError, next, username, "The login could not be saved; the server log has the details.")
		return
	}
	try.succeeded()
	// Bound to the password checked, not to one set since.
	u.setDeviceCookie(w, r, h.Username, device, h.PasswordStamp())
	// Logins are rare: a good moment to drop expired sessions, so the table stays
	// small without a background job.
	if _, err := u.store.PruneWebSessions(r.Context()); err != nil {
		u.log.Warn("web: prune expired sessions", "err", err)
	}
	u.setSessionCookie(w, r, token)
	http.SetCookie(w, &http.Cookie{Name: loginCookie, Value: "", Path: "/login", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: u.secure(r)})
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
}

func (u *UI) tooMany(w http.ResponseWriter, r *http.Request, next, username string, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	u.showLogin(w, r, http.StatusTooManyRequests, next, username,
		fmt.Sprintf("Too many failed attempts from here (this address, or this browser). Try again in %s.", waitText(secs)))
}

func (u *UI) logout(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	if err := u.store.DeleteWebSession(r.Context(), rc.token); err != nil {
		u.log.Error("web: delete session", "err", err)
	}
	u.streams.end(rc.Operator.ID, rc.CSRF)
	u.clearSessionCookie(w, r)
	http.Redirect(w, r, "/login?out=1", http.StatusSeeOther)
}

// loggedOut are the login page's notices after a logout (?out=).
var loggedOut = map[string]string{
	"1":          "You are logged out.",
	"everywhere": "You are logged out, in every browser where you were logged in.",
}

// logoutEverywhere serves POST /logout/everywhere: the operator ends every session
// they have, in every browser, this one included (a session left open on another
// computer, say).
func (u *UI) logoutEverywhere(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	if _, _, err := u.store.EndSessions(r.Context(), rc.Operator.Username, rc.actor()); err != nil {
		u.storeError(w, r, rc, "Logging out everywhere", err)
		return
	}
	u.streams.end(rc.Operator.ID, "")
	u.clearSessionCookie(w, r)
	http.Redirect(w, r, "/login?out=everywhere", http.StatusSeeOther)
}

// safeNext keeps the post-login redirect on this site: a local path, never
// "//evil.example" or "/\evil.example", which browsers treat as another host.
//
// Browsers drop tabs and newlines anywhere in a URL and read a backslash as a slash,
// so "/\t/evil.example" and "/\\evil.example" would leave the site: any control
// character or backslash is refused, and what is left must parse as a bare path.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/login") ||
		strings.IndexFunc(next, func(r rune) bool { return r < 0x20 || r == 0x7f || r == '\\' }) >= 0 {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Opaque != "" || !strings.HasPrefix(u.Path, "/") {
		return "/"
	}
	return next
}

func randomToken() string {
	b := make([]byte, 32)
	rand.Read(b) // never fails (crypto/rand panics rather than return short)
	return base64.RawURLEncoding.EncodeToString(b)
}

// waitText says a wait of secs seconds as a person would: seconds up to two
// minutes, then minutes, rounded up.
func waitText(secs int) string {
	if secs <= 120 {
		return plural(secs, "second")
	}
	return plural((secs+59)/60, "minute")
}

func plural(n int, unit string) string {
	if n == 1 {
		return "1 " + unit
	}
	return strconv.Itoa(n) + " " + unit + "s"
}

// loginDenied answers a login whose password is wrong: counted against the
// throttle, audited (the username, not the password) so that an operator sees
// guessing, and refused, or throttled once too many have been.
func (u *UI) loginDenied(w http.ResponseWriter, r *http.Request, try *attempt, next, username, ip string) {
	wait := try.failed()
	shown, _ := textcut.Prefix(username, 64)
	if aerr := u.store.Audit(r.Context(), store.AuditEntry{Actor: "anonymous", Action: "human.login",
		Target: "username:" + shown, Outcome: "denied", Detail: "ip=" + ip}); aerr != nil {
		u.log.Warn("web: audit failed login", "err", aerr)
	}
	if wait > 0 {
		u.tooMany(w, r, next, username, wait)
		return
	}
	u.showLogin(w, r, http.StatusUnauthorized, next, username, "Unknown username or wrong password.")
}
