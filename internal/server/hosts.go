package server

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/internal/rebinding"
)

// guardHosts applies /mcp's DNS-rebinding rule to every route but the webhook
// receiver: /metrics names queues, /readyz modules, and the board is the board.
// Producers reach the receiver through tunnels by names of their own, and its
// deliveries are signed.
func guardHosts(h http.Handler, baseURL string) http.Handler {
	var publicHost string
	if u, err := url.Parse(baseURL); err == nil {
		publicHost = u.Host
	}
	receiver, _, _ := strings.Cut(ingest.Route, ":")
	return rebinding.Guard(h, publicHost, func(r *http.Request) bool { return strings.HasPrefix(r.URL.Path, receiver) })
}
