package oauth

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/internal/egress"
	"github.com/switchboardhq/switchboard/internal/httpbody"
	"github.com/switchboardhq/switchboard/store"
)

// Client is who asks for a grant, as the consent page shows it.
type Client struct {
	ID           string
	Name         string
	RedirectURIs []string
	// Verified: the client is identified by the URL of its metadata document,
	// which was fetched from there just now. A registered client's name is
	// whatever it said when it registered.
	Verified bool
}

// Bounds of a client metadata document fetch.
const (
	maxMetadataBytes = 64 << 10
	metadataTimeout  = 5 * time.Second
	maxClientName    = 100
	maxRedirectURIs  = 10
)

// MetadataClient is the HTTP client that fetches client metadata documents:
// through the egress rules (policy nil: no loopback, private or link-local
// address), time-capped, and following no redirect. tlsConf, when set, is its
// TLS configuration (tests trust their own server with it).
func MetadataClient(policy *egress.Policy, tlsConf *tls.Config) *http.Client {
	c := egress.NewClient(&egress.Dialer{Guard: egress.Guard{Policy: policy}, Timeout: metadataTimeout}, metadataTimeout)
	if tlsConf != nil {
		c.Transport.(*http.Transport).TLSClientConfig = tlsConf
	}
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return c
}

// isMetadataURL reports whether a client_id names a metadata document.
func isMetadataURL(id string) bool { return strings.HasPrefix(id, "https://") }

// client resolves a client_id: a metadata document URL is fetched, anything
// else must be a registered client.
func (s *Server) client(ctx context.Context, id string) (Client, error) {
	if isMetadataURL(id) {
		return s.fetchClient(ctx, id)
	}
	c, err := s.st.OAuthClient(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return Client{}, fmt.Errorf("unknown client_id %.100q", id)
	}
	if err != nil {
		return Client{}, err
	}
	return Client{ID: c.ClientID, Name: c.Name, RedirectURIs: c.RedirectURIs}, nil
}

// fetchClient fetches and checks a client metadata document.
func (s *Server) fetchClient(ctx context.Context, id string) (Client, error) {
	u, err := url.Parse(id)
	if err != nil || u.Host == "" || !asciiHost(u) || u.User != nil || u.Fragment != "" || u.Path == "" || u.Path == "/" {
		return Client{}, fmt.Errorf("client_id %.100q is not a usable metadata document URL (https, an ASCII host, a path, no fragment)", id)
	}
	ctx, cancel := context.WithTimeout(ctx, metadataTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, id, nil)
	if err != nil {
		return Client{}, fmt.Errorf("client metadata document %.100q: %w", id, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := s.opts.Metadata.Do(req)
	if err != nil {
		return Client{}, fmt.Errorf("client metadata document %.100q could not be fetched: %w", id, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Client{}, fmt.Errorf("client metadata document %.100q answered %d (redirects are not followed)", id, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxMetadataBytes+1))
	if err != nil {
		return Client{}, fmt.Errorf("client metadata document %.100q could not be read: %w", id, err)
	}
	if len(body) > maxMetadataBytes {
		return Client{}, fmt.Errorf("client metadata document %.100q is larger than %d KiB", id, maxMetadataBytes>>10)
	}
	var doc clientMetadata
	if err := json.Unmarshal(body, &doc); err != nil {
		return Client{}, fmt.Errorf("client metadata document %.100q is not JSON: %w", id, err)
	}
	if doc.ClientID != id {
		return Client{}, fmt.Errorf("client metadata document %.100q names another client_id", id)
	}
	if err := doc.check(); err != nil {
		return Client{}, fmt.Errorf("client metadata document %.100q: %w", id, err)
	}
	name := doc.ClientName
	if name == "" {
		name = u.Host
	}
	return Client{ID: id, Name: name, RedirectURIs: doc.RedirectURIs, Verified: true}, nil
}

// clientMetadata is what a metadata document or a registration says (RFC 7591).
type clientMetadata struct {
	ClientID                string   `json:"client_id,omitempty"`
	ClientName              string   `json:"client_name,omitempty"`
	RedirectURIs            []string `json:"redirect_uris"`
	TokenEndpointAuthMethod string   `json:"token_endpoint_auth_method,omitempty"`
	GrantTypes              []string `json:"grant_types,omitempty"`
	ResponseTypes           []string `json:"response_types,omitempty"`
}

func (m clientMetadata) check() error {
	if m.TokenEndpointAuthMethod != "" && m.TokenEndpointAuthMethod != "none" {
		return fmt.Errorf("token_endpoint_auth_method %.40q is not supported (only none: a public client with PKCE)", m.TokenEndpointAuthMethod)
	}
	for _, g := range m.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return fmt.Errorf("grant type %.40q is not supported", g)
		}
	}
	for _, t := range m.ResponseTypes {
		if t != "code" {
			return fmt.Errorf("response type %.40q is not supported", t)
		}
	}
	if !utf8.ValidString(m.ClientName) || utf8.RuneCountInString(m.ClientName) > maxClientName ||
		strings.IndexFunc(m.ClientName, unshowable) >= 0 {
		return fmt.Errorf("client_name must be at most %d printable characters", maxClientName)
	}
	if len(m.RedirectURIs) == 0 || len(m.RedirectURIs) > maxRedirectURIs {
		return fmt.Errorf("redirect_uris must list 1 to %d URIs", maxRedirectURIs)
	}
	for _, r := range m.RedirectURIs {
		if err := checkRedirectURI(r); err != nil {
			return err
		}
	}
	return nil
}

// unshowable reports whether r may not appear in a client name the consent
// page shows: a control character, or a format or separator one that is
// invisible or reorders the text around it (U+200B, U+202E, U+2066, U+2028).
func unshowable(r rune) bool {
	return unicode.IsControl(r) || unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp)
}

// checkRedirectURI accepts an https URI, or an http one on the loopback
// interface (a native client's local listener), without a fragment or a user.
func checkRedirectURI(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || len(raw) > 2000 || u.Host == "" || u.User != nil || u.Fragment != "" || strings.ContainsAny(raw, " \\\t\r\n") {
		return fmt.Errorf("redirect URI %.100q is not an absolute URI without a fragment", raw)
	}
	if !asciiHost(u) {
		return fmt.Errorf("redirect URI %.100q: write its host in ASCII (an internationalized name in its xn-- form)", raw)
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && isLoopback(u.Hostname()):
		return nil
	}
	return fmt.Errorf("redirect URI %.100q must be https, or http on localhost", raw)
}

// asciiHost reports whether u's host is ASCII. The consent page shows hosts
// as they are written: a Unicode one could be a homograph of another site's
// ("аpple.com" with a Cyrillic а), while its xn-- form cannot pass for one.
func asciiHost(u *url.URL) bool {
	return strings.IndexFunc(u.Host, func(r rune) bool { return r >= utf8.RuneSelf }) < 0
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// maxRegistrationBytes bounds a registration request.
const maxRegistrationBytes = 16 << 10

// register is dynamic client registration (RFC 7591), for public clients.
func (s *Server) register(w http.ResponseWriter, r *http.Request) {
	body, status := httpbody.Read(w, r, maxRegistrationBytes, httpbody.DefaultTimeout)
	if status != 0 {
		oauthError(w, status, "invalid_client_metadata", "the registration could not be read")
		return
	}
	var m clientMetadata
	if err := json.Unmarshal(body, &m); err != nil {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "the registration is not a JSON object")
		return
	}
	if m.ClientID != "" {
		oauthError(w, http.StatusBadRequest, "invalid_client_metadata", "client_id is assigned, not chosen")
		return
	}
	if err := m.check(); err != nil {
		code := "invalid_client_metadata"
		if strings.Contains(err.Error(), "redirect") {
			code = "invalid_redirect_uri"
		}
		oauthError(w, http.StatusBadRequest, code, err.Error())
		return
	}
	if m.ClientName == "" {
		m.ClientName = "unnamed client"
	}
	c, err := s.st.RegisterOAuthClient(r.Context(), m.ClientName, m.RedirectURIs)
	if errors.Is(err, store.ErrConflict) {
		oauthError(w, http.StatusTooManyRequests, "invalid_client_metadata", "too many registrations today; try again later")
		return
	}
	if err != nil {
		s.log.Error("oauth: register a client", "err", err)
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the registration could not be saved")
		return
	}
	s.log.Info("oauth: client registered", "client_id", c.ClientID, "client_name", c.Name)
	writeJSON(w, http.StatusCreated, map[string]any{
		"client_id":                  c.ClientID,
		"client_id_issued_at":        c.CreatedAt.Unix(),
		"client_name":                c.Name,
		"redirect_uris":              c.RedirectURIs,
		"token_endpoint_auth_method": "none",
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
	})
}

// registered reports whether uri is one of c's redirect URIs, exactly, or
// differs from an http loopback one only in its port: a native client listens
// on whichever port it got, so RFC 8252 §7.3 has any port allowed there (Claude
// Code's metadata document lists http://localhost/callback and asks with
// http://localhost:53682/callback).
func (c Client) registered(uri string) bool {
	if slices.Contains(c.RedirectURIs, uri) {
		return true
	}
	u, err := url.Parse(uri)
	if err != nil || u.Scheme != "http" || !isLoopback(u.Hostname()) || checkRedirectURI(uri) != nil {
		return false
	}
	want := portless(u)
	return slices.ContainsFunc(c.RedirectURIs, func(r string) bool {
		v, err := url.Parse(r)
		return err == nil && v.Scheme == "http" && isLoopback(v.Hostname()) && portless(v) == want
	})
}

// portless is u written without its port.
func portless(u *url.URL) string {
	v := *u
	v.Host = strings.TrimSuffix(v.Host, ":"+v.Port())
	return v.String()
}
