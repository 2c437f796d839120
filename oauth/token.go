package oauth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

func storeGrant(req Request, endpointID int64, codeTTL time.Duration) store.NewOAuthGrant {
	return store.NewOAuthGrant{EndpointID: endpointID, ClientID: req.Client.ID, ClientName: req.Client.Name,
		RedirectURI: req.RedirectURI, Verified: req.Client.Verified, CodeChallenge: req.CodeChallenge, CodeTTL: codeTTL}
}

// validVerifierShape reports whether v is 43 to 128 characters of base64url
// (a PKCE verifier, and so an S256 challenge, which is 43).
func validVerifierShape(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for _, r := range v {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '.', r == '_', r == '~':
		default:
			return false
		}
	}
	return true
}

// s256 is the PKCE S256 challenge of a verifier.
func s256(verifier string) string {
	sum := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// errGrant is a refused exchange: invalid_grant, with why.
type errGrant string

func (e errGrant) Error() string { return string(e) }

// token is the token endpoint: a code or a refresh token for new tokens.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	f := r.PostForm
	if res := f.Get("resource"); res != "" && !s.isResource(res) {
		oauthError(w, http.StatusBadRequest, "invalid_target", "resource must be "+s.resource)
		return
	}
	clientID := f.Get("client_id")
	var toks store.OAuthTokens
	var err error
	switch f.Get("grant_type") {
	case "authorization_code":
		if missing(w, f, "code", "redirect_uri", "client_id") {
			return
		}
		verifier, redirect := f.Get("code_verifier"), f.Get("redirect_uri")
		toks, err = s.st.RedeemOAuthCode(r.Context(), f.Get("code"), func(g store.OAuthGrant, challenge string) error {
			switch {
			case g.ClientID != clientID:
				return errGrant("the code was issued to another client")
			case g.RedirectURI != redirect:
				return errGrant("redirect_uri is not the one the code was issued for")
			case !validVerifierShape(verifier):
				return errGrant("code_verifier is missing or malformed")
			case subtle.ConstantTimeCompare([]byte(s256(verifier)), []byte(challenge)) != 1:
				return errGrant("code_verifier does not match the code_challenge")
			}
			return nil
		}, s.ttls())
	case "refresh_token":
		if missing(w, f, "refresh_token", "client_id") {
			return
		}
		toks, err = s.st.RefreshOAuth(r.Context(), f.Get("refresh_token"), func(g store.OAuthGrant) error {
			if g.ClientID != clientID {
				return errGrant("the refresh token was issued to another client")
			}
			return nil
		}, s.ttls())
	default:
		oauthError(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code or refresh_token")
		return
	}
	if !s.tokenRefused(w, err) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"access_token":  toks.Access,
		"token_type":    "Bearer",
		"expires_in":    int64(s.opts.AccessTTL / time.Second),
		"refresh_token": toks.Refresh,
	})
}

// tokenRefused answers a failed exchange; it returns true when err is nil.
func (s *Server) tokenRefused(w http.ResponseWriter, err error) bool {
	var eg errGrant
	switch {
	case err == nil:
		return true
	case errors.As(err, &eg):
		oauthError(w, http.StatusBadRequest, "invalid_grant", eg.Error())
	case errors.Is(err, store.ErrOAuthReplay):
		s.log.Warn("oauth: a code or refresh token was presented again; its grant is revoked", "err", err)
		oauthError(w, http.StatusBadRequest, "invalid_grant", "this code or refresh token was used before: the grant is revoked")
	case errors.Is(err, store.ErrNotFound):
		oauthError(w, http.StatusBadRequest, "invalid_grant", "unknown, expired or revoked")
	default:
		s.log.Error("oauth: token exchange", "err", err)
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the exchange could not be completed")
	}
	return false
}

// revoke is the revocation endpoint (RFC 7009): always 200, whether the token
// was known or not.
func (s *Server) revoke(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		return
	}
	if missing(w, r.PostForm, "token") {
		return
	}
	tok := r.PostForm.Get("token")
	if err := s.st.RevokeOAuthToken(r.Context(), tok, r.PostForm.Get("client_id")); err != nil {
		s.log.Error("oauth: revoke a token", "err", fmt.Sprint(err))
		oauthError(w, http.StatusServiceUnavailable, "temporarily_unavailable", "the revocation could not be saved")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Access-Control-Allow-Origin", "*")
	w.WriteHeader(http.StatusOK)
}
