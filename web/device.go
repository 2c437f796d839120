package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"sync"
	"time"
)

// Device cookies (OWASP's answer to lockouts): a browser where an operator has
// logged in keeps a cookie naming that operator, signed with a key kept in the
// database. Its login attempts for that operator count against their own
// username and address alone, not against the address's network, so guessers
// who share the operator's address (an office behind one NAT, a /64, a reverse
// proxy that does not forward the client's address) cannot lock the operator
// out by failing for other names. The cookie grants nothing else: the password
// is still checked, and a wrong one still counts.

const (
	deviceCookie = "sb_device"
	deviceMaxAge = 365 * 24 * time.Hour
)

// deviceKeys loads the signing key once, from the store.
type deviceKeys struct {
	mu  sync.Mutex
	key []byte
}

func (d *deviceKeys) get(u *UI, ctx context.Context) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.key == nil {
		key, err := u.store.Secret(ctx, "device-cookie")
		if err != nil {
			u.log.Warn("web: device cookie key; logins count against their network too", "err", err)
			return nil
		}
		d.key = key
	}
	return d.key
}

func deviceMAC(key []byte, username string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("device\x00" + username))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// trustedDevice reports whether the request comes from a browser where username
// logged in before.
func (u *UI) trustedDevice(r *http.Request, username string) bool {
	c, err := r.Cookie(deviceCookie)
	if err != nil {
		return false
	}
	key := u.devices.get(u, r.Context())
	return key != nil && hmac.Equal([]byte(c.Value), []byte(deviceMAC(key, username)))
}

// setDeviceCookie marks this browser as one where username logged in.
func (u *UI) setDeviceCookie(w http.ResponseWriter, r *http.Request, username string) {
	key := u.devices.get(u, r.Context())
	if key == nil {
		return
	}
	http.SetCookie(w, &http.Cookie{Name: deviceCookie, Value: deviceMAC(key, username), Path: "/login",
		MaxAge: int(deviceMaxAge / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: u.secure(r)})
}
