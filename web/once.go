package web

import (
	"net/http"
	"sync"
	"time"
)

// A form that mints a secret (New webhook, Rotate secret, New endpoint) carries
// a one-time token. Sent twice (a double click, the browser's "resubmit the
// form?" on reloading the page it answered), it acts once: the second answer
// shows the page the first one did, so the secret it minted is not lost, a
// second rotation does not end, at once, the secret the producer still signs
// with, and a second endpoint with a credential nobody saw is not made. Results
// are kept per session for onceTTL.

// onceTTL is how long a result answers a resubmission of its form.
const onceTTL = 10 * time.Minute

// onceShow shows the page a form's first sending made.
type onceShow func(w http.ResponseWriter, r *http.Request, rc *reqCtx)

type onceResult struct {
	show onceShow
	at   time.Time
}

type onceResults struct {
	mu sync.Mutex // held while acting, so a resubmission waits for the first
	m  map[string]onceResult
}

// runOnce runs act unless this session already sent this form, and shows the
// page act made. act renders its own refusal and returns nil.
func (u *UI) runOnce(w http.ResponseWriter, r *http.Request, rc *reqCtx, act func() onceShow) {
	token := r.PostForm.Get("once")
	if len(token) < 16 || len(token) > 64 {
		if show := act(); show != nil {
			show(w, r, rc)
		}
		return
	}
	key := rc.CSRF + "/" + token
	o := &u.once
	o.mu.Lock()
	defer o.mu.Unlock()
	now := u.now()
	if res, ok := o.m[key]; ok && now.Sub(res.at) < onceTTL {
		res.show(w, r, rc)
		return
	}
	show := act()
	if show == nil {
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
	o.m[key] = onceResult{show: show, at: now}
	show(w, r, rc)
}

// secretOnce is runOnce for the forms that show a webhook's secret.
func (u *UI) secretOnce(w http.ResponseWriter, r *http.Request, rc *reqCtx, act func() (webhookSecretPage, bool)) {
	u.runOnce(w, r, rc, func() onceShow {
		p, ok := act()
		if !ok {
			return nil
		}
		return func(w http.ResponseWriter, r *http.Request, rc *reqCtx) { u.showSecret(w, r, rc, p) }
	})
}
