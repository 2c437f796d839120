// Package egress enforces Switchboard's global egress policy on the
// connections Switchboard itself makes for remote and REST capabilities: every
// connection's destination name is checked against the policy's allowlist, and
// every address it resolves to against the address boundary, and then the
// address that was checked is the one dialed (no second lookup a rebinding DNS
// server could answer differently). Redirects are followed only within the
// same rules, and never for a request that carries a body.
//
// It never reads Switchboard's environment, never uses a proxy (a proxy would
// make the connection somewhere the policy never saw), and never lets a caller
// widen the boundary beyond what the policy and the capability's manifest say.
package egress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"strings"
)

// ErrRefused is wrapped by every refusal of a destination.
var ErrRefused = errors.New("egress: destination refused")

// Policy is the global egress policy (--egress-policy), decoded.
type Policy struct {
	// Allow lists the host names connections may go to: "api.example.com"
	// exactly, or "*.example.com" for any name under it (not the name itself).
	// Nil when the policy names no hosts: any name is allowed, its addresses
	// still checked.
	Allow []string
	// Networks are address ranges connections may reach although they are
	// loopback, private or link-local ("10.20.0.0/16", "169.254.169.254/32").
	Networks []netip.Prefix
}

type wirePolicy struct {
	Allow    *[]string `json:"allow"`
	Networks []string  `json:"networks"`
}

// Parse decodes the policy's JSON; "" is no policy (nil, nil). Unknown fields,
// malformed names and ranges are errors. An IP address in allow, IPv4 or
// IPv6, is kept in netip's spelling, as CheckHost spells an address host.
func Parse(s string) (*Policy, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	var w wirePolicy
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("egress policy: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("egress policy: data after the policy object")
	}
	p := &Policy{}
	if w.Allow != nil {
		p.Allow = []string{}
		for _, h := range *w.Allow {
			name := strings.ToLower(strings.TrimSuffix(h, "."))
			if a, err := netip.ParseAddr(h); err == nil && a.Zone() == "" {
				name = a.String() // an address, IPv6 too, in its one spelling
			} else if !validPattern(name) {
				return nil, fmt.Errorf("egress policy: allow: %q is not a host name or *.name", h)
			}
			p.Allow = append(p.Allow, name)
		}
	}
	for _, n := range w.Networks {
		pre, err := netip.ParsePrefix(n)
		if err != nil {
			return nil, fmt.Errorf("egress policy: networks: %q is not a CIDR range: %w", n, err)
		}
		p.Networks = append(p.Networks, pre.Masked())
	}
	return p, nil
}

func validPattern(name string) bool {
	name = strings.TrimPrefix(name, "*.")
	if name == "" || len(name) > 253 {
		return false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// Guard is the policy as one capability sees it.
type Guard struct {
	Policy *Policy // nil: no global policy
	// AllowPrivate is the manifest's "allow_private_network": loopback and
	// private ranges are allowed; link-local ones still need the policy.
	AllowPrivate bool
}

// CheckHost refuses a destination name the policy's allowlist does not name.
// An IP literal is a name too: the allowlist must name it.
func (g Guard) CheckHost(host string) error {
	if g.Policy == nil || g.Policy.Allow == nil {
		return nil
	}
	h := strings.ToLower(strings.TrimSuffix(host, "."))
	if a, err := netip.ParseAddr(host); err == nil {
		h = a.String()
	}
	for _, pat := range g.Policy.Allow {
		if h == pat {
			return nil
		}
		if suffix, ok := strings.CutPrefix(pat, "*"); ok && strings.HasSuffix(h, suffix) && len(h) > len(suffix) {
			return nil
		}
	}
	return fmt.Errorf("%w: host %q is not in the egress policy's allow list", ErrRefused, host)
}

// CheckAddr refuses an address outside the boundary: anything but a public
// unicast address, unless the policy's networks name it, or it is loopback or
// private and the capability allows its private network.
func (g Guard) CheckAddr(a netip.Addr) error {
	// Without its zone: netip's Prefix.Contains is false for any zoned
	// address, which would carry it past every range below.
	a = a.Unmap().WithZone("")
	if g.Policy != nil && slices.ContainsFunc(g.Policy.Networks, func(p netip.Prefix) bool { return p.Contains(a) }) {
		return nil
	}
	kind := special(a)
	switch {
	case kind == "":
		return nil
	case g.AllowPrivate && (kind == "loopback" || kind == "private"):
		return nil
	}
	if kind == "loopback" || kind == "private" {
		return fmt.Errorf("%w: %s is a %s address: the capability's manifest must say \"allow_private_network\": true, "+
			"or the egress policy's networks name it", ErrRefused, a, kind)
	}
	return fmt.Errorf("%w: %s is a %s address, reached only where the egress policy's networks name it", ErrRefused, a, kind)
}

// reserved are ranges that are neither public nor covered by netip's
// predicates: carrier-grade NAT, benchmarking, documentation, "this network".
var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"), // NAT64 reaches IPv4 addresses unchecked
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated): ::7f00:1 is 127.0.0.1
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated (SIIT)
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated private)
}

// special names the kind of a non-public address, "" for a public one.
func special(a netip.Addr) string {
	switch {
	case !a.IsValid():
		return "invalid"
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast():
		return "link-local"
	case a.IsPrivate():
		return "private"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsMulticast(), a.IsInterfaceLocalMulticast():
		return "multicast"
	case a.Is4() && a == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "broadcast"
	}
	for _, p := range reserved {
		if p.Contains(a) {
			return "reserved"
		}
	}
	return ""
}
