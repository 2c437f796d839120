package testkit

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/chromedp/chromedp"
)

// ChromiumPath is where Debian's chromium package puts the browser.
const ChromiumPath = "/usr/bin/chromium"

// Chromium starts a fresh headless chromium for the test, driven through
// chromedp, or skips (see SkipOrFail) when there is none.
func Chromium(t testing.TB) context.Context {
	t.Helper()
	path := ChromiumPath
	if _, err := os.Stat(path); err != nil {
		if p, lerr := exec.LookPath("chromium"); lerr == nil {
			path = p
		} else {
			SkipOrFail(t, "chromium not installed at %s (apt-get install -y chromium); skipping browser tests", ChromiumPath)
		}
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// Start the browser on a context without a deadline: a deadline on the first
	// run would bound the browser's whole life.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}
