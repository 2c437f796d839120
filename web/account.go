package web

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// The Account page: the operator's own password, and the browsers they are logged
// in on. A password forgotten altogether is reset from the CLI (`operator passwd`).

type accountPage struct {
	Sessions []store.LiveSession
	Others   int
}

// accountPage serves GET /account.
func (u *UI) accountPage(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	u.showAccount(w, r, rc, http.StatusOK, u.takeFlash(w, r, rc), "")
}

func (u *UI) showAccount(w http.ResponseWriter, r *http.Request, rc *reqCtx, status int, flash, msg string) {
	live, err := u.store.WebSessions(r.Context(), rc.Operator.ID, rc.token)
	if err != nil {
		u.storeError(w, r, rc, "Listing your sessions", err)
		return
	}
	p := accountPage{Sessions: live}
	for _, s := range live {
		if !s.Current {
			p.Others++
		}
	}
	u.render(w, r, rc, status, "account", view{Title: "Account", Nav: "account", Flash: flash, Error: msg, Page: p})
}

// changePassword serves POST /account/password: the current password, then the
// new one twice. Every other session of the operator ends (whoever held one may
// have known the old password); this browser stays logged in, under a new session
// token, so a copy of its cookie taken before is of no use. Wrong current
// passwords are audited and count against the session (doubling waits, as failed
// logins), so a session left open is no way to guess the password either.
func (u *UI) changePassword(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	current, next := r.PostForm.Get("current"), r.PostForm.Get("new")
	if next != r.PostForm.Get("confirm") {
		u.showAccount(w, r, rc, http.StatusBadRequest, "", "The new password and its repetition differ: nothing was changed.")
		return
	}
	ip := u.clientIP(r)
	// Counted against the session, whatever its address: a session left open is
	// no faster a way to guess from many addresses than from one, and guessers
	// elsewhere cannot lock its operator out of changing the password.
	wait, try := u.throttle.begin(byDevice("session\x00" + rc.CSRF))
	if wait > 0 {
		u.accountTooMany(w, r, rc, wait)
		return
	}
	release, ok := u.hashing.acquire(r.Context())
	if !ok {
		try.abandoned()
		w.Header().Set("Retry-After", strconv.Itoa(int(hashWait.Seconds())))
		u.showAccount(w, r, rc, http.StatusServiceUnavailable, "",
			"The server is busy checking other passwords: nothing was changed. Try again in a few seconds.")
		return
	}
	change, err := u.store.ChangePassword(r.Context(), rc.Operator.Username, current, next, rc.token, rc.actor())
	release()
	if err != nil && !errors.Is(err, store.ErrBadPassword) {
		try.abandoned() // the current password was not found wrong
	}
	switch {
	case errors.Is(err, store.ErrBadPassword):
		// Recorded (not the password), as a failed login is: guessing through a
		// session left open shows in the audit log.
		if aerr := u.store.Audit(r.Context(), store.AuditEntry{Actor: rc.actor(), Action: "human.password",
			Target: rc.actor(), Outcome: "denied", Detail: "ip=" + ip}); aerr != nil {
			u.log.Warn("web: audit a refused password change", "err", aerr)
		}
		if wait := try.failed(); wait > 0 {
			u.accountTooMany(w, r, rc, wait)
			return
		}
		u.showAccount(w, r, rc, http.StatusUnauthorized, "", "The current password is wrong: nothing was changed.")
		return
	case errors.Is(err, store.ErrInvalid):
		u.showAccount(w, r, rc, http.StatusBadRequest, "", "The new "+plainError(err)+": nothing was changed.")
		return
	case err != nil:
		u.storeError(w, r, rc, "Changing your password", err)
		return
	}
	try.succeeded()
	// The new password ended every device cookie: this browser gets a new one.
	u.setDeviceCookie(w, r, rc.Operator.Username, "", "")
	if change.Token == "" {
		// Made already, by the same form sent a moment before.
		u.streams.endExcept(rc.Operator.ID, rc.CSRF)
	} else {
		// This browser's session has a new token: every stream of the operator
		// ends, this browser's reconnecting with it.
		u.streams.end(rc.Operator.ID, "")
		u.setSessionCookie(w, r, change.Token)
		rc.token, rc.CSRF = change.Token, csrfToken(change.Token)
	}
	u.redirectFlash(w, r, rc, "/account", fmt.Sprintf("password:%d", change.Ended))
}

func (u *UI) accountTooMany(w http.ResponseWriter, r *http.Request, rc *reqCtx, wait time.Duration) {
	secs := int(math.Ceil(wait.Seconds()))
	w.Header().Set("Retry-After", strconv.Itoa(secs))
	u.showAccount(w, r, rc, http.StatusTooManyRequests, "",
		fmt.Sprintf("Too many wrong passwords. Try again in %s.", waitText(secs)))
}

// endOtherSessions serves POST /account/sessions/end-others: every browser the
// operator is logged in on but this one is logged out, its live updates at once.
func (u *UI) endOtherSessions(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	ended, err := u.store.EndOtherSessions(r.Context(), rc.Operator.Username, rc.token, rc.actor())
	if err != nil {
		u.storeError(w, r, rc, "Logging out your other sessions", err)
		return
	}
	u.streams.endExcept(rc.Operator.ID, rc.CSRF)
	u.redirectFlash(w, r, rc, "/account", fmt.Sprintf("others-ended:%d", ended))
}
