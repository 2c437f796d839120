package web

import (
	"net/http"
	"sync"
	"time"
)

// A form that mints a secret (New webhook, Rotate secret) carries a one-time
// token. Sent twice (a double click, the browser's "resubmit the form?"), it
// acts once: the second answer shows the page the first one did, so the secret
// it minted is not lost and a second rotation does not end, at once, the secret
// the producer still signs with. Results are kept per session for onceTTL.

// onceTTL is how long a result answers a resubmission of its form.
const onceTTL = 10 * time.Minute

type onceResult struct {
	page webhookSecretPage
	at   time.Time
}

type onceResults struct {
	mu sync.Mutex // held while acting, so a resubmission waits for the first
	m  map[string]onceResult
}

// secretOnce runs act unless this session already sent this form, and shows
// the secret page act built. act renders its own refusal and returns false.
func (u *UI) secretOnce(w http.ResponseWriter, r *http.Request, rc *reqCtx, act func() (webhookSecretPage, bool)) {
	token := r.PostForm.Get("once")
	if len(token) < 16 || len(token) > 64 {
		if p, ok := act(); ok {
			u.showSecret(w, r, rc, p)
		}
		return
	}
	key := rc.CSRF + "/" + token
	o := &u.once
	o.mu.Lock()
	defer o.mu.Unlock()
	now := u.now()
	if res, ok := o.m[key]; ok && now.Sub(res.at) < onceTTL {
		u.showSecret(w, r, rc, res.page)
		return
	}
	p, ok := act()
	if !ok {
		return
	}
	for k, res := range o.m {
		if now.Sub(res.at) >= onceTTL {
			delete(o.m, k)
		}
	}
	if o.m == nil {
		o.m = map[string]onceResult{}
	}
	o.m[key] = onceResult{page: p, at: now}
	u.showSecret(w, r, rc, p)
}
