package oauth

import (
	"context"
	"net/url"
	"strings"
)

// Request is an authorization request that passed every check: what the
// consent page shows and, once the operator chooses, what Approve grants.
type Request struct {
	Client        Client
	RedirectURI   string
	State         string
	CodeChallenge string
	Resource      string
	// Params are the request's parameters as received, for the consent form to
	// send back (it is checked again then).
	Params url.Values
}

// RedirectHost is the host the code will be sent to.
func (r Request) RedirectHost() string {
	u, _ := url.Parse(r.RedirectURI)
	return u.Host
}

// RedirectOrigin is the origin the consent form's answer redirects to (its
// page's Content-Security-Policy must allow it as a form action).
func (r Request) RedirectOrigin() string {
	u, _ := url.Parse(r.RedirectURI)
	return u.Scheme + "://" + u.Host
}

// Error is a refused authorization request. With Redirect empty it must be
// shown on the page: the client or its redirect URI could not be trusted, and
// nothing may be sent there. Otherwise Redirect is where the browser goes.
type Error struct {
	Code        string
	Description string
	Redirect    string
}

func (e *Error) Error() string { return e.Code + ": " + e.Description }

// maxState bounds the state parameter, which is sent back as it came.
const maxState = 1024

// ParseAuthorize checks an authorization request (a GET's query, or the
// consent form sent back). The client and its exact redirect URI are checked
// first: until both hold, an error is shown, never redirected.
func (s *Server) ParseAuthorize(ctx context.Context, q url.Values) (Request, *Error) {
	for k, v := range q {
		if len(v) > 1 && k != "csrf_token" {
			return Request{}, &Error{Code: "invalid_request", Description: "the parameter " + truncate(k) + " is repeated"}
		}
	}
	id := q.Get("client_id")
	if id == "" {
		return Request{}, &Error{Code: "invalid_request", Description: "client_id is missing"}
	}
	c, err := s.client(ctx, id)
	if err != nil {
		s.log.Info("oauth: authorization request refused", "client_id", truncate(id), "why", err.Error())
		return Request{}, &Error{Code: "invalid_client", Description: err.Error()}
	}
	redirect := q.Get("redirect_uri")
	if !c.registered(redirect) {
		return Request{}, &Error{Code: "invalid_request",
			Description: "redirect_uri " + truncate(redirect) + " is not one the client registered, exactly"}
	}
	req := Request{Client: c, RedirectURI: redirect, State: q.Get("state"), CodeChallenge: q.Get("code_challenge"),
		Resource: q.Get("resource"), Params: q}
	if len(req.State) > maxState {
		return Request{}, &Error{Code: "invalid_request", Description: "state is too long"}
	}
	fail := func(code, desc string) (Request, *Error) {
		return Request{}, &Error{Code: code, Description: desc, Redirect: s.errorRedirect(req, code, desc)}
	}
	switch {
	case q.Get("response_type") != "code":
		return fail("unsupported_response_type", "response_type must be code")
	case req.CodeChallenge == "":
		return fail("invalid_request", "code_challenge is missing: PKCE is required")
	case q.Get("code_challenge_method") != "S256":
		return fail("invalid_request", "code_challenge_method must be S256")
	case !validVerifierShape(req.CodeChallenge):
		return fail("invalid_request", "code_challenge is not a base64url SHA-256")
	case req.Resource != "" && !s.isResource(req.Resource):
		return fail("invalid_target", "resource must be "+s.resource)
	}
	req.Resource = s.resource
	return req, nil
}

// isResource reports whether a resource parameter names this server's /mcp.
func (s *Server) isResource(r string) bool {
	return strings.TrimSuffix(r, "/") == s.resource
}

// Approve records the operator's consent (a grant of endpointID to the client)
// and returns where the browser goes: the redirect URI with the code.
func (s *Server) Approve(ctx context.Context, req Request, endpointID int64, actor string) (string, error) {
	_, code, err := s.st.CreateOAuthGrant(ctx, storeGrant(req, endpointID, s.opts.CodeTTL), actor)
	if err != nil {
		return "", err
	}
	return s.respond(req, url.Values{"code": {code}}), nil
}

// Deny returns where the browser goes when the operator refuses.
func (s *Server) Deny(req Request) string {
	return s.errorRedirect(req, "access_denied", "the operator refused")
}

func (s *Server) errorRedirect(req Request, code, desc string) string {
	return s.respond(req, url.Values{"error": {code}, "error_description": {desc}})
}

// respond adds the answer, the state and the issuer (RFC 9207) to the
// registered redirect URI, keeping any query it has.
func (s *Server) respond(req Request, v url.Values) string {
	u, _ := url.Parse(req.RedirectURI)
	q := u.Query()
	for k, vs := range v {
		q[k] = vs
	}
	if req.State != "" {
		q.Set("state", req.State)
	}
	q.Set("iss", s.issuer)
	u.RawQuery = q.Encode()
	return u.String()
}

func truncate(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return "\"" + strings.ToValidUTF8(s, "?") + "\""
}
