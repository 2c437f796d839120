package web

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"

	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/internal/testkit/teststore"
	"github.com/switchboardhq/switchboard/store"
)

// A device cookie set before the secret encryption key was configured, and one
// set after, still mark the operator's browser after restarts with the key, the
// signing key now sealed in the database.
func TestDeviceCookiesOutliveRestartsWithTheSecretKey(t *testing.T) {
	path := testkit.DB(t)
	key := bytes.Repeat([]byte{9}, 32)
	boot := func(key []byte) (*store.Store, *UI) {
		t.Helper()
		st := teststore.OpenPath(t, path, store.Options{Synchronous: store.SyncNormal, SecretKey: key})
		return st, New(st, Options{Logger: quietLog})
	}
	mint := func(ui *UI) *http.Cookie {
		t.Helper()
		rec := httptest.NewRecorder()
		ui.setDeviceCookie(rec, httptest.NewRequest(http.MethodPost, "/login", nil), "ana", "", "")
		cs := rec.Result().Cookies()
		if len(cs) != 1 || cs[0].Name != deviceCookie {
			t.Fatalf("no device cookie set: %v", cs)
		}
		return cs[0]
	}
	trusted := func(ui *UI, c *http.Cookie) bool {
		r := httptest.NewRequest(http.MethodPost, "/login", nil)
		r.AddCookie(c)
		return ui.trustedDevice(r, "ana") != ""
	}

	st, ui := boot(nil)
	if _, err := st.CreateOperator(context.Background(), "ana", testPassword, "test"); err != nil {
		t.Fatal(err)
	}
	before := mint(ui)
	ui.Close()
	st.Close()

	st, ui = boot(key)
	after := mint(ui)
	ui.Close()
	st.Close()

	st, ui = boot(key)
	defer st.Close()
	defer ui.Close()
	for name, c := range map[string]*http.Cookie{"set before the key": before, "set with the key": after} {
		if !trusted(ui, c) {
			t.Errorf("a device cookie %s is not trusted after a restart", name)
		}
	}
	forged := &http.Cookie{Name: deviceCookie, Value: strings.Split(after.Value, ".")[0] + ".forged"}
	if trusted(ui, forged) {
		t.Fatal("a forged device cookie is trusted")
	}
}
