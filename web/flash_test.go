package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

const retriedText = "Retried: the todo is back on its queue"

// A flash is shown once, to the session whose action earned it: a reload does not
// repeat it, and neither a crafted link nor a crafted cookie fakes one.
func TestFlashIsOneShotAndUnforgeable(t *testing.T) {
	f := newFixture(t, Options{})
	cookie, csrf := f.login()
	dead := f.failed("inbox")
	page := fmt.Sprintf("/todos/%d", dead.ID)

	res, _ := f.post(page+"/retry", cookie, url.Values{csrfField: {csrf}})
	var flash *http.Cookie
	for _, c := range res.Cookies() {
		if c.Name == flashCookie {
			flash = c
		}
	}
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != page || flash == nil {
		t.Fatalf("retry: %d to %q, flash cookie %v", res.StatusCode, res.Header.Get("Location"), flash)
	}
	// The page after the action confirms it, and clears the flash.
	res = f.do(http.MethodGet, page, cookie, nil, http.Header{"Cookie": {flash.Name + "=" + flash.Value}})
	cleared := false
	for _, c := range res.Cookies() {
		cleared = cleared || (c.Name == flashCookie && c.MaxAge < 0)
	}
	if body := readBody(t, res); !strings.Contains(body, retriedText) || !cleared {
		t.Fatalf("the page after the retry: flash shown %v, cleared %v", strings.Contains(body, retriedText), cleared)
	}
	// A reload (the browser has dropped the cookie) shows nothing.
	if _, body := f.get(page, cookie); strings.Contains(body, retriedText) {
		t.Fatal("a reload repeats the flash")
	}

	done := f.addTodo("inbox", "{}")
	donePage := fmt.Sprintf("/todos/%d", done.ID)
	other, _ := f.login()
	for name, c := range map[string]string{
		"the old ?flash= link":            "",
		"a bare flash cookie":             "retried",
		"a flash cookie with a wrong MAC": "retried." + flashMAC("not the session", "retried"),
		"another session's flash cookie":  "retried." + flashMAC(other.Value, "retried"),
		"a flash cookie not in the list":  "boom." + flashMAC(cookie.Value, "boom"),
		"a count where none belongs":      "retried:3." + flashMAC(cookie.Value, "retried:3"),
	} {
		hdr := http.Header{}
		if c != "" {
			hdr.Set("Cookie", flashCookie+"="+c)
		}
		res := f.do(http.MethodGet, donePage+"?flash=retried", cookie, nil, hdr)
		if body := readBody(t, res); strings.Contains(body, `class="flash ok"`) {
			t.Errorf("%s shows a flash on a todo nobody retried", name)
		}
	}
}
