package agent

import (
	"errors"
	"net/http"
	"time"

	"github.com/switchboardhq/switchboard/internal/cfaccess"
	"github.com/switchboardhq/switchboard/store"
)

// accessRefusedLogEvery bounds the log lines of refused Access assertions.
const accessRefusedLogEvery = time.Minute

// accessEndpoint is the Cloudflare Access way in: a request with no
// Authorization header whose Cf-Access-Jwt-Assertion verifies acts as the
// endpoint that answers for the assertion's identity (store.Endpoint's
// CFAccessIdentity), with that endpoint's scope, limits and sessions, exactly
// as its bearer would. handled is false when the request carries no such
// credential (Access is off, or the request has an Authorization header or no
// assertion): the bearer check decides. Otherwise the request is either
// authenticated (ok) or answered 401 (or 503 when the store fails).
func (a *Agent) accessEndpoint(w http.ResponseWriter, r *http.Request) (ep store.Endpoint, ok, handled bool) {
	assertion := r.Header.Get(cfaccess.Header)
	if a.opts.CFAccess == nil || assertion == "" || r.Header.Get("Authorization") != "" {
		return store.Endpoint{}, false, false
	}
	id, err := a.opts.CFAccess.Verify(r.Context(), assertion)
	if err != nil {
		a.accessRefused(w, err.Error(), "")
		return store.Endpoint{}, false, true
	}
	ep, err = a.st.EndpointByCFAccessIdentity(r.Context(), id.Value)
	switch {
	case errors.Is(err, store.ErrNotFound):
		a.accessRefused(w, "no live endpoint answers for this Cloudflare Access identity", id.Value)
		return store.Endpoint{}, false, true
	case err != nil:
		a.log.Error("authenticate agent by Cloudflare Access", "err", err)
		http.Error(w, "service unavailable", http.StatusServiceUnavailable)
		return store.Endpoint{}, false, true
	}
	return ep, true, true
}

// accessRefused answers 401 and logs why, at most once a minute per reason
// (and identity), with the count since: the assertion itself is never logged.
func (a *Agent) accessRefused(w http.ResponseWriter, why, identity string) {
	if n := a.accessRefusals.Note(why+"\x00"+identity, a.opts.Now()); n > 0 {
		a.log.Warn("Cloudflare Access request refused", "why", why, "identity", identity, "times", n)
	}
	w.Header().Set("WWW-Authenticate", `Bearer realm="switchboard", error="invalid_token"`)
	http.Error(w, "unauthorized: "+why, http.StatusUnauthorized)
}
