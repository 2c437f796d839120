// Package oauth makes Switchboard the OAuth 2.1 authorization server of its own
// /mcp, as the MCP authorization specification asks: the metadata documents
// (RFC 9728, RFC 8414), the authorization code flow with PKCE S256 only, clients
// identified by a metadata document URL or registered dynamically (RFC 7591),
// tokens bound to this server's /mcp (RFC 8707), rotating refresh tokens and
// revocation (RFC 7009).
//
// A grant maps a client onto an endpoint the operator chose on the consent page
// (package web renders it, with ParseAuthorize and Approve from here): its
// access token is exactly as limited as that endpoint's bearer. Tokens are
// opaque random strings the store keeps only as hashes. This package never logs
// a code or a token and never redirects to an address the client did not
// register exactly (but for the port of an http loopback one, RFC 8252 §7.3).
package oauth

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/internal/httpbody"
	"github.com/switchboardhq/switchboard/store"
)

// Routes, kept as the design names them.
const (
	ProtectedResourcePath   = "/.well-known/oauth-protected-resource"
	AuthorizationServerPath = "/.well-known/oauth-authorization-server"
	AuthorizePath           = "/oauth/authorize"
	TokenPath               = "/oauth/token"
	RegisterPath            = "/oauth/register"
	RevokePath              = "/oauth/revoke"
)

// Options configure New.
type Options struct {
	// BaseURL is the public URL of this server: the issuer, and with /mcp the
	// one resource its tokens are good for. Required.
	BaseURL string
	// Registration turns dynamic client registration (RFC 7591) on.
	Registration bool
	// Metadata fetches client metadata documents; nil: MetadataClient with
	// the default egress rules (no loopback, private or link-local address).
	Metadata *http.Client
	// CodeTTL, AccessTTL and RefreshTTL are the lives of what a grant issues
	// (defaults 1 minute, 1 hour, 30 days).
	CodeTTL, AccessTTL, RefreshTTL time.Duration
	Logger                         *slog.Logger
}

// Server is the authorization server.
type Server struct {
	st       *store.Store
	opts     Options
	log      *slog.Logger
	issuer   string
	resource string
}

// New builds the authorization server on st.
func New(st *store.Store, opts Options) (*Server, error) {
	u, err := url.Parse(opts.BaseURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("oauth: the base URL %q is not an absolute http(s) URL", opts.BaseURL)
	}
	if opts.Metadata == nil {
		opts.Metadata = MetadataClient(nil, nil)
	}
	if opts.CodeTTL <= 0 {
		opts.CodeTTL = time.Minute
	}
	if opts.AccessTTL <= 0 {
		opts.AccessTTL = time.Hour
	}
	if opts.RefreshTTL <= 0 {
		opts.RefreshTTL = 30 * 24 * time.Hour
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	issuer := strings.TrimSuffix(opts.BaseURL, "/")
	return &Server{st: st, opts: opts, log: opts.Logger, issuer: issuer, resource: issuer + "/mcp"}, nil
}

// Issuer is this server's issuer identifier (its base URL).
func (s *Server) Issuer() string { return s.issuer }

// Resource is the protected resource its tokens are bound to: /mcp.
func (s *Server) Resource() string { return s.resource }

// ResourceMetadataURL is what a 401 on /mcp points clients at.
func (s *Server) ResourceMetadataURL() string { return s.issuer + ProtectedResourcePath }

func (s *Server) ttls() store.OAuthTTLs {
	return store.OAuthTTLs{Code: s.opts.CodeTTL, Access: s.opts.AccessTTL, Refresh: s.opts.RefreshTTL}
}

// Mount adds the routes that are not board pages: the metadata, token,
// registration and revocation endpoints. /oauth/authorize is the board's.
func (s *Server) Mount(r *httprouter.Router) {
	r.HandlerFunc(http.MethodGet, ProtectedResourcePath, s.protectedResource)
	r.HandlerFunc(http.MethodGet, ProtectedResourcePath+"/mcp", s.protectedResource)
	r.HandlerFunc(http.MethodGet, AuthorizationServerPath, s.authorizationServer)
	r.HandlerFunc(http.MethodPost, TokenPath, s.token)
	r.HandlerFunc(http.MethodPost, RevokePath, s.revoke)
	if s.opts.Registration {
		r.HandlerFunc(http.MethodPost, RegisterPath, s.register)
	}
	for _, p := range []string{TokenPath, RevokePath, RegisterPath} {
		r.HandlerFunc(http.MethodOptions, p, preflight)
	}
}

// preflight answers a browser-based client's CORS preflight: these endpoints
// take no cookie, so any origin may call them.
func preflight(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "POST")
	h.Set("Access-Control-Allow-Headers", "Content-Type, Authorization, MCP-Protocol-Version")
	h.Set("Access-Control-Max-Age", "3600")
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) protectedResource(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"resource":                 s.resource,
		"authorization_servers":    []string{s.issuer},
		"bearer_methods_supported": []string{"header"},
		"resource_name":            "Switchboard",
	})
}

func (s *Server) authorizationServer(w http.ResponseWriter, _ *http.Request) {
	md := map[string]any{
		"issuer":                                         s.issuer,
		"authorization_endpoint":                         s.issuer + AuthorizePath,
		"token_endpoint":                                 s.issuer + TokenPath,
		"revocation_endpoint":                            s.issuer + RevokePath,
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"revocation_endpoint_auth_methods_supported":     []string{"none"},
		"client_id_metadata_document_supported":          true,
		"authorization_response_iss_parameter_supported": true,
	}
	if s.opts.Registration {
		md["registration_endpoint"] = s.issuer + RegisterPath
	}
	writeJSON(w, http.StatusOK, md)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// oauthError answers an error of the token, registration or revocation endpoint.
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSON(w, status, map[string]string{"error": code, "error_description": desc})
}

// maxFormBytes bounds a token or revocation request.
const maxFormBytes = 16 << 10

// readForm reads a bounded form body; false when it answered the request.
func readForm(w http.ResponseWriter, r *http.Request) bool {
	if status := httpbody.ParseForm(w, r, maxFormBytes, httpbody.DefaultTimeout); status != 0 {
		oauthError(w, status, "invalid_request", "the form could not be read")
		return false
	}
	if len(r.URL.RawQuery) > 0 {
		// Codes and tokens belong in the body, never in a URL (and its logs).
		oauthError(w, http.StatusBadRequest, "invalid_request", "parameters go in the form body, not the URL")
		return false
	}
	// Any other body parses as an empty form, whose answer would blame
	// parameters the client did send.
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/x-www-form-urlencoded" {
		oauthError(w, http.StatusBadRequest, "invalid_request",
			"the body must be an application/x-www-form-urlencoded form, not "+truncate(mt))
		return false
	}
	for k, v := range r.PostForm {
		if len(v) > 1 { // RFC 6749 section 3.2: no parameter more than once
			oauthError(w, http.StatusBadRequest, "invalid_request", "the parameter "+truncate(k)+" is repeated")
			return false
		}
	}
	return true
}

// missing answers a request that lacks one of the parameters named, and
// reports whether it did.
func missing(w http.ResponseWriter, f url.Values, names ...string) bool {
	for _, n := range names {
		if f.Get(n) == "" {
			oauthError(w, http.StatusBadRequest, "invalid_request", n+" is missing")
			return true
		}
	}
	return false
}
