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
	"os"
	"strings"
	"sync"
)

// HostAllowed reports whether r may be answered: a request that arrived on a
// loopback address must name a loopback host, this machine's own name (which
// Debian and most images map to a loopback address), or publicHost (the host of
// the configured public URL, which a reverse proxy on the same machine forwards,
// with or without its port: nginx's `Host $host` drops it). Only the name counts,
// not the port: a hostile page can make a browser send none of these names.
func HostAllowed(r *http.Request, publicHost string) bool {
	local, ok := localAddr(r)
	if !ok || !IsLoopback(local) {
		return true
	}
	if IsLoopback(r.Host) {
		return true
	}
	name := hostOnly(r.Host)
	if name == "" {
		return false
	}
	if publicHost != "" && strings.EqualFold(name, hostOnly(publicHost)) {
		return true
	}
	own := machineName()
	return own != "" && strings.EqualFold(name, own)
}

// machineName is this machine's host name, read once: it does not change while
// a server runs, and a request should not cost a system call.
var machineName = sync.OnceValue(func() string {
	name, err := os.Hostname()
	if err != nil {
		return ""
	}
	return name
})

// hostOnly is hostport's host, without the port or an IPv6 address's brackets.
func hostOnly(hostport string) string {
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		return host
	}
	return strings.Trim(hostport, "[]")
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
	host := hostOnly(hostport)
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
