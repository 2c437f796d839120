package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"syscall"
	"time"
)

// Resolver looks a host name up; net.DefaultResolver.LookupNetIP is the one
// Switchboard uses, tests give their own.
type Resolver func(ctx context.Context, network, host string) ([]netip.Addr, error)

// Dialer makes connections within a Guard.
type Dialer struct {
	Guard   Guard
	Resolve Resolver // nil: net.DefaultResolver.LookupNetIP
	Timeout time.Duration
	// Secret names headers that hold a credential: a redirect to another host
	// goes without them (net/http drops only Authorization, Cookie and their
	// kin, not an API key header of the capability's own).
	Secret []string
}

// DialContext checks addr's host name, resolves it, keeps the addresses
// within the boundary and dials those, in order, by address: the name is
// never looked up again. The dialer's Control checks each socket's address
// once more before it connects, so nothing else reaches the network.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if err := d.Guard.CheckHost(host); err != nil {
		return nil, err
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{a}
	} else {
		resolve := d.Resolve
		if resolve == nil {
			resolve = net.DefaultResolver.LookupNetIP
		}
		if addrs, err = resolve(ctx, "ip", host); err != nil {
			return nil, fmt.Errorf("egress: resolve %s: %w", host, err)
		}
	}
	var refused error
	dialer := net.Dialer{Timeout: d.Timeout, Control: d.control}
	var lastErr error
	for _, a := range addrs {
		if err := d.Guard.CheckAddr(a); err != nil {
			refused = err
			continue
		}
		conn, err := dialer.DialContext(ctx, network, net.JoinHostPort(a.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		lastErr = err
	}
	switch {
	case lastErr != nil:
		return nil, lastErr
	case refused != nil:
		return nil, fmt.Errorf("%s: %w", host, refused)
	}
	return nil, fmt.Errorf("egress: %s resolves to no address", host)
}

// control is the last check, on the very address the socket connects to.
func (d *Dialer) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: cannot read the address %q", ErrRefused, address)
	}
	return d.Guard.CheckAddr(ap.Addr())
}

// maxHeaderBytes bounds an answer's headers (net/http's default is 10 MB).
const maxHeaderBytes = 64 << 10

// maxRedirects bounds the redirects one request follows.
const maxRedirects = 5

// NewClient returns an HTTP client whose every connection goes through d and
// that follows redirects only within the Guard: an http or https URL (never https to http) whose host
// the allowlist names (its addresses are checked when dialed), never for a
// request with a body (a redirect may not carry the body on), at most
// maxRedirects. timeout bounds a whole request, redirects and body included.
func NewClient(d *Dialer, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		Proxy:                  nil, // a proxy would connect where the guard never looked
		DialContext:            d.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           64,
		MaxIdleConnsPerHost:    16,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    10 * time.Second,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: maxHeaderBytes,
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: d.checkRedirect}
}

func (d *Dialer) checkRedirect(req *http.Request, via []*http.Request) error {
	first := via[0]
	if first.Method != http.MethodGet && first.Method != http.MethodHead {
		return fmt.Errorf("%w: a %s request is not redirected (to %s)", ErrRefused, first.Method, req.URL.Redacted())
	}
	if len(via) > maxRedirects {
		return fmt.Errorf("%w: more than %d redirects", ErrRefused, maxRedirects)
	}
	if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
		return fmt.Errorf("%w: redirect to a %q URL", ErrRefused, req.URL.Scheme)
	}
	if req.URL.Scheme == "http" && via[len(via)-1].URL.Scheme == "https" {
		// net/http would send the headers on, Authorization among them, in clear.
		return fmt.Errorf("%w: redirect from https to http (%s)", ErrRefused, req.URL.Redacted())
	}
	if err := d.Guard.CheckHost(req.URL.Hostname()); err != nil {
		return err
	}
	// An address literal is checked now, so the refusal names the redirect.
	if a, err := netip.ParseAddr(req.URL.Hostname()); err == nil {
		if err := d.Guard.CheckAddr(a); err != nil {
			return fmt.Errorf("redirect to %s: %w", req.URL.Redacted(), err)
		}
	}
	if req.URL.Host != first.URL.Host {
		// net/http keeps these for the same host name on another port, or
		// a name under it.
		for _, h := range []string{"Authorization", "Proxy-Authorization", "Cookie"} {
			req.Header.Del(h)
		}
		for _, h := range d.Secret {
			req.Header.Del(h)
		}
	}
	return nil
}

// IsRefused reports whether err is (or wraps) a refusal by the policy.
func IsRefused(err error) bool { return errors.Is(err, ErrRefused) }
