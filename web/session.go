package web

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/internal/forwarded"
	"github.com/switchboardhq/switchboard/internal/httpbody"
	"github.com/switchboardhq/switchboard/store"
)

const (
	sessionCookie = "sb_session"
	csrfField     = "csrf_token"
	csrfHeader    = "X-CSRF-Token"
	// maxFormBytes bounds a form body; the largest form is "add todo" with a payload.
	maxFormBytes = 1<<20 + 64<<10
)

// reqCtx is what an authenticated handler knows about its request.
type reqCtx struct {
	Operator store.Operator
	CSRF     string
	Params   httprouter.Params
	token    string
}

// actor is how the store's audit log names this operator.
func (rc *reqCtx) actor() string { return store.OperatorActor(rc.Operator.ID) }

type handler func(w http.ResponseWriter, r *http.Request, rc *reqCtx)

// csrfToken derives the CSRF token from the session token. Only the holder of the
// cookie can compute it (the database holds neither the token nor this), and it
// changes with every login, so a token leaked from one session is useless in the next.
func csrfToken(sessionToken string) string {
	sum := sha256.Sum256([]byte("csrf\x00" + sessionToken))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// errNoSession: the request has no session cookie, or its session is no longer
// valid (logged out, expired, a new password).
var errNoSession = errors.New("web: no session")

// session resolves the request's session cookie. The error is errNoSession when
// there is none or it is no longer valid, and another when the store could not
// look it up (the database is not answering): that is no logout, and the
// session may be good once it answers again. When it extends the session it
// renews the cookie too.
func (u *UI) session(w http.ResponseWriter, r *http.Request) (*reqCtx, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" || len(c.Value) > 128 {
		return nil, errNoSession
	}
	ws, err := u.store.WebSessionByToken(r.Context(), c.Value)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errNoSession
	}
	if err != nil {
		u.log.Warn("web: look up session", "err", err)
		return nil, err
	}
	// Slide the expiry forward only once half of it is used up, so a busy board does
	// not write on every request.
	if ws.ExpiresAt.Sub(u.now()) < u.opts.SessionTTL/2 {
		if err := u.store.ExtendWebSession(r.Context(), c.Value, u.opts.SessionTTL); err != nil {
			u.log.Warn("web: extend session", "err", err)
		} else {
			u.setSessionCookie(w, r, c.Value)
		}
	}
	return &reqCtx{Operator: ws.Operator, CSRF: csrfToken(c.Value), token: c.Value}, nil
}

// storeRetry is the Retry-After, in seconds, of an answer refused because the
// database is not answering.
const storeRetry = 10

// storeDown answers a request whose session, or login page, the store could
// not read: 503 with Retry-After, and never a login or an ended session, which
// would not be true. A background request gets it in plain text (the page
// script tries again later, as after a network error), a page the error page.
func (u *UI) storeDown(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", strconv.Itoa(storeRetry))
	if isBackground(r) {
		http.Error(w, "the database is not answering; try again shortly", http.StatusServiceUnavailable)
		return
	}
	msg := "The database is not answering. Try again shortly."
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		msg = "The database is not answering, so nothing was done. Try again shortly."
	}
	u.fail(w, r, nil, http.StatusServiceUnavailable, msg)
}

// page wraps a read-only handler: security headers, and a session or a trip to the
// login page. Background requests (live fragments, the event stream) get 401 instead
// of a redirect, so the page script can reload into the login page.
func (u *UI) page(h handler) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		rc, ok := u.signedIn(w, r, "/login?next="+urlQueryEscape(r.URL.RequestURI()))
		if !ok {
			return
		}
		rc.Params = p
		h(w, r, rc)
	}
}

// signedIn sets the headers every session page gets and finds the session. Without
// one it answers (401 to a background request, else a redirect to login) and
// returns false; so it does, with 503, when the store could not look it up.
func (u *UI) signedIn(w http.ResponseWriter, r *http.Request, login string) (*reqCtx, bool) {
	securityHeaders(w.Header())
	w.Header().Set("Cache-Control", "no-store")
	rc, err := u.session(w, r)
	if err != nil && !errors.Is(err, errNoSession) {
		u.storeDown(w, r)
		return nil, false
	}
	if err != nil {
		if isBackground(r) {
			http.Error(w, "login required", http.StatusUnauthorized)
			return nil, false
		}
		// A browser that had a session whose end it was not told of (logged
		// out from another, a new password, expiry) hears why it is asked to
		// log in, and that a form it sent was not acted on.
		if c, err := r.Cookie(sessionCookie); err == nil && c.Value != "" {
			sep := "?"
			if strings.Contains(login, "?") {
				sep = "&"
			}
			ended := "ended=page"
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				ended = "ended=form"
			}
			login += sep + ended
		}
		http.Redirect(w, r, login, http.StatusSeeOther)
		return nil, false
	}
	return rc, true
}

// action wraps a state-changing handler: everything page does, plus a bounded form
// body and the CSRF check. A request without the right token changes nothing.
func (u *UI) action(h handler) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		// Refused below, a form's body is not waited for.
		httpbody.Guard(w, r)
		// A form is not replayed after login, so the way back is the login page alone.
		rc, ok := u.signedIn(w, r, "/login")
		if !ok {
			return
		}
		switch status := httpbody.ParseForm(w, r, maxFormBytes, u.opts.BodyTimeout); status {
		case 0:
		case http.StatusRequestTimeout:
			u.fail(w, r, rc, status, "The form took too long to arrive. Try again.")
			return
		case http.StatusRequestEntityTooLarge:
			u.fail(w, r, rc, status, "The form is too large.")
			return
		default:
			u.fail(w, r, rc, status, "The form could not be read: it is malformed.")
			return
		}
		got := r.Header.Get(csrfHeader)
		if got == "" {
			got = r.PostForm.Get(csrfField)
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte(rc.CSRF)) != 1 {
			u.fail(w, r, rc, http.StatusForbidden,
				"This form has expired or did not come from this board. Go back, reload the page and try again.")
			return
		}
		rc.Params = p
		h(w, r, rc)
	}
}

// public wraps handlers that need no session (the login page).
func (u *UI) public(h httprouter.Handle) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
		securityHeaders(w.Header())
		w.Header().Set("Cache-Control", "no-store")
		h(w, r, p)
	}
}

// isBackground tells script-initiated requests from page navigations.
func isBackground(r *http.Request) bool {
	return r.Header.Get("X-Requested-With") != "" || strings.Contains(r.Header.Get("Accept"), "text/event-stream")
}

// secure reports whether the browser reached us over TLS, directly or through a
// trusted proxy; session cookies are marked Secure then.
func (u *UI) secure(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	return u.opts.TrustProxy && strings.EqualFold(strings.TrimSpace(r.Header.Get("X-Forwarded-Proto")), "https")
}

// clientIP is the address login throttling is keyed on: the peer, or with a trusted
// proxy the address that proxy appended last to X-Forwarded-For (earlier entries are
// whatever the client claimed).
func (u *UI) clientIP(r *http.Request) string {
	if u.opts.TrustProxy {
		if ip := forwarded.LastHop(r.Header); ip != "" {
			return ip
		}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

func (u *UI) setSessionCookie(w http.ResponseWriter, r *http.Request, token string) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: token, Path: "/",
		MaxAge:   int(u.opts.SessionTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: u.secure(r),
	})
}

func (u *UI) clearSessionCookie(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: u.secure(r),
	})
}
