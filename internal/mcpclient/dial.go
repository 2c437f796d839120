// Package mcpclient is the client side of Switchboard's /mcp: Dial connects a Go
// program (a test, the bench) with a bearer credential, and package bridge
// relays a stdio-only MCP client. It must not import the server (package agent),
// whose tests dial through it.
package mcpclient

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/client/transport"
	"github.com/mark3labs/mcp-go/mcp"
)

// ProtocolVersion is the MCP revision Dial asks for: the newest one /mcp serves
// that keeps sessions (agent.SessionProtocolVersion, which agent's tests hold it
// to). Dial's clients hold a session and its GET stream.
const ProtocolVersion = mcp.ProtocolVersion20251125

// DialOptions configure Dial.
type DialOptions struct {
	// Listen opens the GET stream after the handshake, which carries the
	// doorbell and tools/list_changed.
	Listen bool
	// OnNotification receives every notification, from the GET stream or a
	// streamed response. It is registered before the handshake.
	OnNotification func(mcp.JSONRPCNotification)
	// HTTPClient replaces http.DefaultClient.
	HTTPClient *http.Client
	// ClientName is reported in initialize (default "switchboard-dial").
	ClientName string
	// Logger receives the transport's diagnostics (default slog.Default()).
	Logger *slog.Logger
}

// Dial connects an mcp-go client to a Switchboard /mcp URL with a bearer
// credential and completes the handshake. It is for tests, benchmarks and the
// bench command; agents use their own MCP clients. Close the client when done.
func Dial(ctx context.Context, url, credential string, o DialOptions) (*client.Client, *mcp.InitializeResult, error) {
	// The credential rides on the client's transport, not mcp-go's
	// WithHTTPHeaders, which its DELETE at Close leaves out: the session would be
	// refused its end (401) and linger until the idle sweep.
	hc := http.DefaultClient
	if o.HTTPClient != nil {
		hc = o.HTTPClient
	}
	authed := *hc
	authed.Transport = bearer{credential: credential, next: hc.Transport}
	topts := []transport.StreamableHTTPCOption{transport.WithHTTPBasicClient(&authed)}
	if o.Listen {
		topts = append(topts, transport.WithContinuousListening())
	}
	if o.Logger != nil {
		topts = append(topts, transport.WithHTTPLogger(o.Logger))
	}
	tr, err := transport.NewStreamableHTTP(url, topts...)
	if err != nil {
		return nil, nil, fmt.Errorf("mcpclient: dial %s: %w", url, err)
	}
	c := client.NewClient(tr, client.WithProtocolVersion(ProtocolVersion))
	if o.OnNotification != nil {
		c.OnNotification(o.OnNotification)
	}
	// The GET stream lives until Close, not until ctx, which bounds the handshake.
	if err := c.Start(context.WithoutCancel(ctx)); err != nil {
		return nil, nil, fmt.Errorf("mcpclient: dial %s: start: %w", url, err)
	}
	name := o.ClientName
	if name == "" {
		name = "switchboard-dial"
	}
	res, err := c.Initialize(ctx, mcp.InitializeRequest{Params: mcp.InitializeParams{
		ProtocolVersion: ProtocolVersion,
		ClientInfo:      mcp.Implementation{Name: name, Version: "1"},
	}})
	if err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("mcpclient: dial %s: initialize: %w", url, err)
	}
	return c, res, nil
}

// bearer adds the credential to every request it carries.
type bearer struct {
	credential string
	next       http.RoundTripper // nil: http.DefaultTransport
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.credential)
	next := b.next
	if next == nil {
		next = http.DefaultTransport
	}
	return next.RoundTrip(r)
}
