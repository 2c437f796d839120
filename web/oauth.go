package web

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/oauth"
	"github.com/switchboardhq/switchboard/store"
)

// The consent page of the OAuth flow (package oauth checks the request and
// issues the code): the operator, logged in, sees which client asks and picks
// the endpoint whose scope it gets.

// authorizeParams are the parameters of an authorization request the consent
// form sends back; nothing else of the request is echoed.
var authorizeParams = []string{"response_type", "client_id", "redirect_uri", "state", "code_challenge",
	"code_challenge_method", "resource", "scope"}

type consentPage struct {
	Request   oauth.Request
	Params    [][2]string
	Endpoints []store.Endpoint
	NewURL    string // the endpoint form, which leads back here
}

func (u *UI) registerOAuth(r *httprouter.Router) {
	r.GET(oauth.AuthorizePath, u.consentEntry)
	r.POST(oauth.AuthorizePath, u.action(u.consent))
	r.POST("/endpoints/:id/grants/:grant/revoke", u.action(u.revokeGrant))
	r.GET("/endpoints/:id/grants/:grant/revoke", pageOf("/endpoints")) // as actionPages does
}

// consentEntry serves GET /oauth/authorize. The session cookie is SameSite
// Strict, so a browser sent here from the client's site does not show it:
// without one, the page reloads itself once, now from this site, before it
// asks for a login.
func (u *UI) consentEntry(w http.ResponseWriter, r *http.Request, p httprouter.Params) {
	if u.opts.OAuth == nil {
		http.NotFound(w, r)
		return
	}
	if _, err := r.Cookie(sessionCookie); err != nil && r.URL.Query().Get("sb_reload") == "" {
		securityHeaders(w.Header())
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		q := r.URL.Query()
		q.Set("sb_reload", "1")
		again := html.EscapeString(oauth.AuthorizePath + "?" + q.Encode())
		_, _ = w.Write([]byte(`<!doctype html><meta http-equiv="refresh" content="0; url=` + again +
			`"><title>Switchboard</title><p><a href="` + again + `">Continue to Switchboard</a></p>`))
		return
	}
	u.page(u.consentPage)(w, r, p)
}

func (u *UI) consentPage(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	req, oerr := u.opts.OAuth.ParseAuthorize(r.Context(), r.URL.Query())
	if oerr != nil {
		u.refuseAuthorize(w, r, rc, oerr)
		return
	}
	u.showConsent(w, r, rc, http.StatusOK, req, "")
}

func (u *UI) showConsent(w http.ResponseWriter, r *http.Request, rc *reqCtx, status int, req oauth.Request, msg string) {
	eps, err := u.store.ListEndpoints(r.Context(), false)
	if err != nil {
		u.storeError(w, r, rc, "Listing endpoints", err)
		return
	}
	p := consentPage{Request: req, Endpoints: eps}
	back := url.Values{}
	for _, k := range authorizeParams {
		if v := req.Params.Get(k); v != "" {
			p.Params = append(p.Params, [2]string{k, v})
			back.Set(k, v)
		}
	}
	p.NewURL = "/endpoints/new?" + url.Values{"next": {oauth.AuthorizePath + "?" + back.Encode()}}.Encode()
	// The form's answer redirects to the client: the policy must let it.
	if o := req.RedirectOrigin(); !strings.ContainsAny(o, " ;,'\"") {
		w.Header().Set("Content-Security-Policy",
			strings.Replace(contentSecurityPolicy, "form-action 'self'", "form-action 'self' "+o, 1))
	}
	u.render(w, r, rc, status, "consent", view{Title: "Connect " + req.Client.Name, Error: msg, Page: p})
}

// refuseAuthorize answers a request that failed its checks: back to the client
// when its redirect URI is trusted, else on this page and nowhere else.
func (u *UI) refuseAuthorize(w http.ResponseWriter, r *http.Request, rc *reqCtx, e *oauth.Error) {
	if e.Redirect != "" {
		http.Redirect(w, r, e.Redirect, http.StatusSeeOther)
		return
	}
	u.fail(w, r, rc, http.StatusBadRequest, "This authorization request was refused: "+e.Description+".")
}

// consent serves POST /oauth/authorize: the operator's answer.
func (u *UI) consent(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	if u.opts.OAuth == nil {
		http.NotFound(w, r)
		return
	}
	q := url.Values{}
	for _, k := range authorizeParams {
		if v, ok := r.PostForm[k]; ok {
			q[k] = v
		}
	}
	req, oerr := u.opts.OAuth.ParseAuthorize(r.Context(), q)
	if oerr != nil {
		u.refuseAuthorize(w, r, rc, oerr)
		return
	}
	if r.PostForm.Get("decision") != "allow" {
		http.Redirect(w, r, u.opts.OAuth.Deny(req), http.StatusSeeOther)
		return
	}
	id, err := strconv.ParseInt(r.PostForm.Get("endpoint"), 10, 64)
	if err != nil || id <= 0 {
		u.showConsent(w, r, rc, http.StatusBadRequest, req, "Choose the endpoint whose scope the client gets.")
		return
	}
	to, err := u.opts.OAuth.Approve(r.Context(), req, id, rc.actor())
	if errorsIs(err, store.ErrNotFound) {
		u.showConsent(w, r, rc, http.StatusBadRequest, req, "That endpoint is revoked or gone: choose another.")
		return
	}
	if err != nil {
		u.storeError(w, r, rc, "Granting access", err)
		return
	}
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// grantsByEndpoint lists the live OAuth grants by endpoint, for the Endpoints page.
func (u *UI) grantsByEndpoint(r *http.Request) (map[int64][]store.OAuthGrant, error) {
	all, err := u.store.OAuthGrants(r.Context(), 0)
	if err != nil {
		return nil, err
	}
	by := map[int64][]store.OAuthGrant{}
	for _, g := range all {
		by[g.EndpointID] = append(by[g.EndpointID], g)
	}
	return by, nil
}

// revokeGrant serves POST /endpoints/:id/grants/:grant/revoke.
func (u *UI) revokeGrant(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	id, ok1 := pathID(rc, "id")
	gid, ok2 := pathID(rc, "grant")
	g, err := u.store.OAuthGrant(r.Context(), gid)
	if !ok1 || !ok2 || errorsIs(err, store.ErrNotFound) || (err == nil && g.EndpointID != id) {
		u.fail(w, r, rc, http.StatusNotFound, "There is no such grant on this endpoint.")
		return
	}
	if err == nil {
		err = u.store.RevokeOAuthGrant(r.Context(), gid, rc.actor())
	}
	if err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Revoking grant %d", gid), err)
		return
	}
	u.redirectFlash(w, r, rc, "/endpoints", "grant-revoked")
}

// consentReturn keeps next only when it is this board's consent page, which
// the endpoint form leads back to.
func consentReturn(next string) string {
	if next = safeNext(next); !strings.HasPrefix(next, oauth.AuthorizePath+"?") {
		return ""
	}
	return next
}
