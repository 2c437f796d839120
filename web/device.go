package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Device cookies (OWASP's answer to lockouts): a browser where an operator has
// logged in keeps a cookie with a random nonce of its own, signed with a key kept
// in the database and bound to the operator's name and current password (a new
// password ends every device cookie). Its login attempts for that operator count
// against that nonce alone (byDevice), not against its address or network: guessers
// who share the operator's address (an office behind one NAT, a /64, a reverse
// proxy that does not forward the client's address) cannot lock the operator out,
// even by failing for the operator's own name, and a stolen cookie guesses no
// faster from many addresses than from one. The password is still checked, and a
// wrong one counts against the device.

const (
	deviceCookie = "sb_device"
	deviceMaxAge = 365 * 24 * time.Hour
	// deviceKeyRetry is how long a key that could not be loaded (or made) is not
	// asked for again: meanwhile every browser counts by address.
	deviceKeyRetry = time.Minute
)

// deviceKeys loads the signing key from the store, once.
type deviceKeys struct {
	mu     sync.Mutex
	key    []byte
	failed time.Time
}

func (d *deviceKeys) get(u *UI, ctx context.Context) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.key == nil && (d.failed.IsZero() || u.now().Sub(d.failed) >= deviceKeyRetry) {
		key, err := u.store.Secret(ctx, "device-cookie")
		if err != nil {
			d.failed = u.now()
			u.log.Warn("web: device cookie key; logins count by address meanwhile", "err", err)
			return nil
		}
		d.key = key
	}
	return d.key
}

func deviceMAC(key []byte, username, nonce, stamp string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("device\x00" + username + "\x00" + nonce + "\x00" + stamp))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// trustedDevice returns the nonce of the request's device cookie when it is one
// username's (signed for them, and their password unchanged since), else "".
func (u *UI) trustedDevice(r *http.Request, username string) string {
	c, err := r.Cookie(deviceCookie)
	if err != nil {
		return ""
	}
	nonce, mac, ok := strings.Cut(c.Value, ".")
	if !ok || nonce == "" {
		return ""
	}
	key := u.devices.get(u, r.Context())
	if key == nil {
		return ""
	}
	stamp, err := u.store.PasswordStamp(r.Context(), username)
	if err != nil || stamp == "" {
		return ""
	}
	if !hmac.Equal([]byte(mac), []byte(deviceMAC(key, username, nonce, stamp))) {
		return ""
	}
	return nonce
}

// setDeviceCookie marks this browser as one where username logged in, keeping
// the nonce it has (nonce), else a new one.
func (u *UI) setDeviceCookie(w http.ResponseWriter, r *http.Request, username, nonce, stamp string) {
	key := u.devices.get(u, r.Context())
	if key == nil {
		return
	}
	if stamp == "" {
		var err error
		if stamp, err = u.store.PasswordStamp(r.Context(), username); err != nil || stamp == "" {
			return
		}
	}
	if nonce == "" {
		nonce = randomToken()
	}
	http.SetCookie(w, &http.Cookie{Name: deviceCookie, Value: nonce + "." + deviceMAC(key, username, nonce, stamp),
		Path: "/login", MaxAge: int(deviceMaxAge / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: u.secure(r)})
}
