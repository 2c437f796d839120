// Package rebinding protects a server that listens on loopback from DNS
// rebinding: a web page whose host name resolves to 127.0.0.1 makes the browser
// send requests here, naming the page's host in Host and its origin in Origin.
// It must never refuse a request that did not arrive on a loopback address (the
// browser of a machine elsewhere reaches us by a name of our own).
package rebinding

import (
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// HostAllowed reports whether r may be answered: a request that arrived on a
// loopback address must name a loopback host or publicHost (the host of the
// configured public URL, which a reverse proxy on the same machine forwards).
// A hostile page can make a browser send neither.
func HostAllowed(r *http.Request, publicHost string) bool {
	local, ok := localAddr(r)
	if !ok || !IsLoopback(local) {
		return true
	}
	return IsLoopback(r.Host) || (publicHost != "" && strings.EqualFold(r.Host, publicHost))
}

// SameListener reports whether origin is this listener as a browser on this
// machine names it: a loopback host (localhost, 127.0.0.1, [::1]) on the port
// the request arrived on, when it arrived on a loopback address. A page of
// another local server has another port; a rebinding page, another host.
func SameListener(r *http.Request, origin string) bool {
	local, ok := localAddr(r)
	if !ok || !IsLoopback(local) {
		return false
	}
	_, port, err := net.SplitHostPort(local)
	if err != nil {
		return false
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" ||
		u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	originPort := u.Port()
	if originPort == "" {
		originPort = map[string]string{"http": "80", "https": "443"}[u.Scheme]
	}
	return originPort == port && IsLoopback(u.Host)
}

// Guard answers 403 to a request HostAllowed refuses, unless exempt says its
// route takes requests from anywhere by any name (a webhook receiver behind a
// tunnel).
func Guard(next http.Handler, publicHost string, exempt func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !exempt(r) && !HostAllowed(r, publicHost) {
			http.Error(w, "forbidden: Host header does not name this server (a reverse proxy's public host goes in serve's --base-url)",
				http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// IsLoopback reports whether hostport (a host, with or without a port) names
// this machine's loopback: localhost or a loopback address.
func IsLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = strings.Trim(hostport, "[]")
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

func localAddr(r *http.Request) (string, bool) {
	local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok || local == nil {
		return "", false
	}
	return local.String(), true
}
