// Package forwarded reads the addresses a request says it was forwarded for.
package forwarded

import (
	"net/http"
	"strings"
)

// For returns every address in the request's X-Forwarded-For header lines, in
// order: the client's claims first, the hop a proxy appended last. A proxy that
// adds its own header line (HAProxy's option forwardfor) rather than extending the
// client's leaves the client's line first, so every line is read, not the first
// alone. Empty entries are dropped.
func For(h http.Header) []string {
	var out []string
	for _, line := range h.Values("X-Forwarded-For") {
		for _, a := range strings.Split(line, ",") {
			if a = strings.TrimSpace(a); a != "" {
				out = append(out, a)
			}
		}
	}
	return out
}

// LastHop is the address the nearest proxy appended: the last of For, or "" when
// there is none. With one trusted proxy in front, it is the client's address;
// whatever the client wrote itself comes before it.
func LastHop(h http.Header) string {
	all := For(h)
	if len(all) == 0 {
		return ""
	}
	return all[len(all)-1]
}
