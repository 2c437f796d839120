package web

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// A flash is the one-line confirmation the page after an action shows ("Retried:
// …"). The action sets it in a cookie and redirects; the page that shows it clears
// the cookie, so a reload does not repeat it. The cookie is bound to the session by
// an HMAC keyed with the session token, so neither a crafted link nor a cookie set
// by someone else makes the board confirm what did not happen. Only fixed texts are
// shown: nothing from the request is echoed but a count the server wrote.

const flashCookie = "sb_flash"

// flashes are the confirmations an action may leave. One with a %s carries a count,
// of todos unless flashUnits says otherwise ("revoked-released:3"), written there
// as "3 todos".
var flashes = map[string]string{
	"released":        "Released: the todo is pending again and its claim does not count as an attempt.",
	"retried":         "Retried: the todo is back on its queue with its attempts reset.",
	"cancelled":       "Cancelled: the todo has ended and will not be claimed or retried by itself.",
	"decided-approve": "Approved: the worker that asked gets the todo back first, with your answer.",
	"decided-deny":    "Denied: the worker that asked gets the todo back first, with your answer.",
	"paused":          "Paused: the queue's todos are not claimable until you resume it; deliveries still land.",
	"resumed":         "Resumed: the queue's todos are claimable again and waiting agents are woken.",
	"retried-all": "Retried %s that had failed: back on their queues with their attempts reset. Any that failed " +
		"again meanwhile stay failed.",
	"added":   "Todo added.",
	"updated": "Endpoint updated. Agents see the change on their next call.",
	"updated-unknown-capabilities": "Endpoint updated. Agents see the change on their next call. A capability it " +
		"grants names no module this server runs: check its spelling against the Modules page (a module set up " +
		"later is granted by it all the same).",
	"updated-unknown-tools": "Endpoint updated. Its tool lists name a tool no module this server runs offers: tools " +
		"are named as agents see them, module_tool (a deny list naming a module's own name for a tool denies nothing).",
	"grant-revoked": "OAuth grant revoked. Its client's tokens fail from the next request on.",
	"revoked":       "Endpoint revoked. Its credential fails from the next request on; its agent held no todos.",
	"revoked-kept": "Endpoint revoked. Its credential fails from the next request on; the todos its agent holds " +
		"stay claimed, because another live endpoint speaks for that agent.",
	"revoked-released": "Endpoint revoked. Its credential fails from the next request on, and the %s its agent held " +
		"went back to pending (no other live endpoint speaks for that agent).",
	"approved":     "Tool definition approved: agents can call the tool again.",
	"approved-new": "New tool approved: agents granted its module can call it.",
	"restarted": "Module restarting: it is stopped and started again at once. Its state below shows how the start went; " +
		"reload the page in a moment.",
	"deleted":       "Webhook deleted. Deliveries to its URL are refused from now on.",
	"replayed":      "Event replayed: a new todo was created from it.",
	"rules-set":     "Rules saved: they apply from the webhook's next delivery.",
	"rules-removed": "Rules removed: from the next delivery on, every delivery makes a todo.",
	"password": "Password changed. Every other browser where you were logged in is logged out (%s); " +
		"this one stays logged in.",
	"others-ended": "Logged out of %s; this browser stays logged in.",
}

// flashUnits names what a counted flash counts, when it is not todos.
var flashUnits = map[string]string{"password": "other session", "others-ended": "other session"}

// flashMAC binds a flash value to the session whose token keys it.
func flashMAC(sessionToken, value string) string {
	m := hmac.New(sha256.New, []byte("flash\x00"+sessionToken))
	m.Write([]byte(value))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// redirectFlash redirects to path, and the page there shows flash once.
func (u *UI) redirectFlash(w http.ResponseWriter, r *http.Request, rc *reqCtx, path, flash string) {
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: flash + "." + flashMAC(rc.token, flash), Path: "/",
		MaxAge: 60, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: u.secure(r)})
	http.Redirect(w, r, path, http.StatusSeeOther)
}

// takeFlash returns the text of the session's flash, if it has one, and clears it.
func (u *UI) takeFlash(w http.ResponseWriter, r *http.Request, rc *reqCtx) string {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: flashCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: u.secure(r)})
	value, mac, ok := strings.Cut(c.Value, ".")
	if !ok || !hmac.Equal([]byte(mac), []byte(flashMAC(rc.token, value))) {
		return ""
	}
	name, count, counted := strings.Cut(value, ":")
	text, ok := flashes[name]
	if !ok || counted != strings.Contains(text, "%s") {
		return ""
	}
	if counted {
		n, err := strconv.Atoi(count)
		if err != nil {
			return ""
		}
		unit := flashUnits[name]
		if unit == "" {
			unit = "todo"
		}
		text = fmt.Sprintf(text, plural(n, unit))
	}
	return text
}
