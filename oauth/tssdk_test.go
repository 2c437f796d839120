package oauth_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/oauth"
	"github.com/switchboardhq/switchboard/store"
)

// TestTypeScriptSDKOAuth: an agent on the official TypeScript SDK's client
// OAuth support (tsclient/oauth.mjs: auth() with an OAuthClientProvider)
// discovers the authorization server from /mcp and registers; the operator
// logs in and consents on the board in headless Chromium, which follows the
// redirect to the agent's callback; the agent exchanges the code, drains a
// todo with the token, refreshes it, and is refused once the grant is
// revoked. Skips without Node.js, the npm registry or Chromium, unless
// SWITCHBOARD_REQUIRE_EXTERNAL=1.
func TestTypeScriptSDKOAuth(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: an npm install, a Node.js client and Chromium")
	}
	dir, node := testkit.NPMInstall(t, "tsclient", "package.json", "package-lock.json", "oauth.mjs")
	browser := testkit.Chromium(t)
	t.Run("registered", func(t *testing.T) { tsAgent(t, dir, node, browser, false) })
	t.Run("metadata document", func(t *testing.T) { tsAgent(t, dir, node, browser, true) })
}

// tsAgent runs oauth.mjs once: a client that registers itself, or one named
// by the URL of its metadata document (served by the test over TLS on
// loopback, which the rig's egress rules let it fetch).
func tsAgent(t *testing.T, dir, node string, browser context.Context, byDocument bool) {
	// The agent's redirect URI: a page on loopback that records where the
	// browser was sent, as a native client's local listener would.
	callbacks := make(chan string, 1)
	agentSite := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		select {
		case callbacks <- "http://" + req.Host + req.URL.RequestURI():
		default:
		}
		io.WriteString(w, "<!doctype html><title>callback</title><p id=done>You may close this window.</p>")
	}))
	t.Cleanup(agentSite.Close)
	args := []string{"oauth.mjs", "", agentSite.URL + "/callback"}
	var tweak func(*oauth.Options)
	badge := "consent-unverified"
	if byDocument {
		var doc *httptest.Server
		doc = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			json.NewEncoder(w).Encode(map[string]any{"client_id": doc.URL + "/client.json", "client_name": "TS SDK agent",
				"redirect_uris": []string{agentSite.URL + "/callback"}, "token_endpoint_auth_method": "none"})
		}))
		t.Cleanup(doc.Close)
		args, tweak, badge = append(args, doc.URL+"/client.json"), loopbackAllowed(doc), "consent-verified"
	}
	r := newRig(t, tweak)
	args[1] = r.base + "/mcp"
	if _, err := r.st.AddTodo(context.Background(), store.NewTodo{Queue: "jobs", Payload: `{"from":"the test"}`, CreatedBy: "system"}); err != nil {
		t.Fatal(err)
	}

	// A deadline, not a timed assertion: a hung client must not hang go test.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, args...)
	cmd.Dir = dir
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdin, _ := cmd.StdinPipe()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var report string
	for lines := bufio.NewScanner(stdout); lines.Scan(); {
		switch line := lines.Text(); {
		case strings.HasPrefix(line, "authorize "):
			consentInBrowser(t, browser, strings.TrimPrefix(line, "authorize "), badge)
			fmt.Fprintln(stdin, <-callbacks)
		case line == "revoke":
			grants, err := r.st.OAuthGrants(ctx, r.endpoint.ID)
			if err != nil || len(grants) != 1 {
				t.Fatalf("grants: %v %v", grants, err)
			}
			if err := r.st.RevokeOAuthGrant(ctx, grants[0].ID, "human:1"); err != nil {
				t.Fatal(err)
			}
			fmt.Fprintln(stdin, "revoked")
		default:
			report = line
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("oauth.mjs: %v\n%s", err, stderr.String())
	}
	var seen struct {
		ClientID     string `json:"clientId"`
		Iss          string `json:"iss"`
		Drained      int64  `json:"drained"`
		Refreshed    bool   `json:"refreshed"`
		AfterRefresh bool   `json:"afterRefresh"`
		AfterRevoke  string `json:"afterRevoke"`
	}
	if err := json.Unmarshal([]byte(report), &seen); err != nil {
		t.Fatalf("report %q: %v\n%s", report, err, stderr.String())
	}
	t.Logf("the TypeScript agent saw %+v", seen)
	if byDocument != strings.HasPrefix(seen.ClientID, "https://") {
		t.Fatalf("the agent's client_id %q (metadata document: %t)", seen.ClientID, byDocument)
	}
	if seen.Iss != r.base || seen.Drained == 0 || !seen.Refreshed || !seen.AfterRefresh || seen.AfterRevoke == "served" {
		t.Fatalf("the TypeScript agent saw %+v", seen)
	}
	if td, err := r.st.Todo(ctx, seen.Drained); err != nil || td.State != store.StateDone {
		t.Fatalf("the drained todo: %+v %v", td, err)
	}
}

// consentInBrowser opens the authorization URL in Chromium as the operator
// would: the board asks for a login, then shows the consent page, where
// Allow sends the browser on to the client's redirect URI.
func consentInBrowser(t *testing.T, ctx context.Context, authorizeURL, badge string) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	err := chromedp.Do(sctx,
		chromedp.Navigate(authorizeURL),
		chromedp.WaitVisible(chromedp.ID("login-form")),
		chromedp.SendKeys(chromedp.CSS(`input[name="username"]`), "ana"),
		chromedp.SendKeys(chromedp.CSS(`input[name="password"]`), "correct horse battery"),
		chromedp.Submit(chromedp.ID("login-form")),
		chromedp.WaitVisible(chromedp.ID("consent-form")),
		chromedp.WaitVisible(chromedp.ID(badge)),
	)
	if err != nil {
		t.Fatalf("consent in the browser: %v", err)
	}
	// Beside the board's screenshots (see web's screenshotDir), for a look.
	png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100))
	if err == nil {
		err = os.WriteFile(filepath.Join("..", "screenshots", "oauth-"+badge+".png"), png, 0o644)
	}
	if err != nil {
		t.Logf("no screenshot of the consent page: %v", err)
	}
	err = chromedp.Do(sctx,
		chromedp.Click(chromedp.CSS(`button[value="allow"]`)),
		chromedp.WaitVisible(chromedp.ID("done")),
	)
	if err != nil {
		t.Fatalf("consent in the browser: %v", err)
	}
}
