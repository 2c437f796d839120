package agent

import (
	"context"
	"errors"

	"github.com/switchboardhq/switchboard/store"
)

// A session or listen stream opened with an OAuth grant's access token belongs
// to that grant, not only to its endpoint: another grant's token (another
// client) may not use it, and revoking the grant ends it, as revoking an
// endpoint ends its endpoint's.

// heldBy reports whether a request authenticated as ep may use session x: the
// same endpoint, through the same grant (or both through the bearer).
func (x *session) heldBy(ep store.Endpoint) bool {
	return x.endpointID == ep.ID && x.grantID == ep.OAuthGrantID
}

// endRevokedGrants ends the sessions and listen streams whose grant is revoked
// or gone. It reports whether every grant could be read.
func (a *Agent) endRevokedGrants(ctx context.Context) (ok bool) {
	ok = true
	gone := map[int64]bool{}
	revoked := func(id int64) bool {
		if id == 0 {
			return false
		}
		if g, seen := gone[id]; seen {
			return g
		}
		g, err := a.st.OAuthGrant(ctx, id)
		switch {
		case err == nil:
			gone[id] = g.RevokedAt != nil
		case errors.Is(err, store.ErrNotFound):
			gone[id] = true
		default:
			a.log.Warn("revalidate sessions: load oauth grant", "grant", id, "err", err)
			ok = false
			return false
		}
		return gone[id]
	}
	for _, x := range a.sessions.all() {
		if revoked(x.grantID) {
			a.endSession(x.id)
		}
	}
	for _, l := range a.listening.list() {
		if revoked(l.grant) {
			l.end("the OAuth grant was revoked")
		}
	}
	return ok
}
