package cli

// This test builds and runs the whole binary, so it lives with the other
// end-to-end tests that drive the CLI, not in ingest/.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// TestRealBinaryWithNPMSigners is the producers' view: webhooks made with the
// switchboard CLI, deliveries signed by @octokit/webhooks-methods, stripe and
// standardwebhooks, sent to the real binary running serve, todos read back with
// the CLI. Secrets are sealed with a key from a file, as under systemd.
func TestRealBinaryWithNPMSigners(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and installs npm packages; skipped with -short")
	}
	sign := testkit.NPMSigner(t, filepath.Join("..", "..", "ingest", "npmsign"))
	// A deadline, not a timed assertion: a wedged child must not hang go test.
	// Cleanups run last-in first-out, so the server is stopped before this ends.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)

	dir := t.TempDir()
	bin := buildSwitchboard(t, ctx)
	key := make([]byte, 32)
	rand.Read(key)
	keyFile := filepath.Join(dir, "secret-key")
	if err := os.WriteFile(keyFile, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(os.Environ(), "SWITCHBOARD_DB="+filepath.Join(dir, "sb.db"), "SWITCHBOARD_SECRET_KEY_FILE="+keyFile,
		"SWITCHBOARD_SECRET_ENCRYPTION_KEY=", "SWITCHBOARD_BASE_URL=https://placeholder.invalid")
	cli := func(args ...string) []byte {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("switchboard %s: %v: %s", strings.Join(args, " "), err, stderr.String())
		}
		return out
	}

	type hook struct {
		ID              int64  `json:"webhook_id"`
		IngestURL       string `json:"ingest_url"`
		Secret          string `json:"signing_secret"`
		SecretEncrypted bool   `json:"secret_encrypted"`
	}
	hooks := map[string]hook{}
	for _, src := range []string{"github", "stripe", "standard"} {
		var h hook
		if err := json.Unmarshal(cli("webhook", "create", "--source", src, "--queue", "q-"+src, "--json"), &h); err != nil {
			t.Fatal(err)
		}
		if h.Secret == "" || !h.SecretEncrypted {
			t.Fatalf("%s webhook: %+v", src, h)
		}
		hooks[src] = h
	}

	base := startIngestBinary(t, ctx, bin, env)
	post := func(src string, headers map[string]string, body string) (int, map[string]any) {
		t.Helper()
		token := strings.TrimPrefix(hooks[src].IngestURL, "https://placeholder.invalid/webhooks/w/")
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ingest.URL(base, token), strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		raw, _ := io.ReadAll(resp.Body)
		json.Unmarshal(raw, &out)
		return resp.StatusCode, out
	}

	bodies := map[string]string{
		"github":   `{"action":"opened","number":7,"note":"naïve café ☕"}`,
		"stripe":   `{"id":"evt_e2e_1","object":"event","type":"invoice.paid"}`,
		"standard": `{"type":"user.created","data":{"id":"u_1"}}`,
	}
	srcs := []string{"github", "stripe", "standard"}
	reqs := make([]testkit.NPMSignRequest, len(srcs))
	for i, src := range srcs {
		reqs[i] = testkit.NPMSignRequest{Scheme: src, Secret: hooks[src].Secret, Body: bodies[src], ID: "dlv-" + src, Event: "pull_request"}
	}
	signed := sign(reqs)
	for i, src := range srcs {
		code, first := post(src, signed[i], bodies[src])
		if code != http.StatusAccepted {
			t.Fatalf("%s: %d %v", src, code, first)
		}
		code, again := post(src, signed[i], bodies[src])
		if code != http.StatusOK || again["duplicate"] != true || again["todo_id"] != first["todo_id"] {
			t.Fatalf("%s redelivery: %d %v (first %v)", src, code, again, first)
		}
		if code, _ := post(src, signed[i], bodies[src]+" "); code != http.StatusUnauthorized {
			t.Fatalf("%s tampered: %d", src, code)
		}
	}

	var todos []struct {
		Queue  string `json:"queue"`
		Source struct {
			Type string `json:"type"`
		} `json:"source"`
		Trust struct {
			Verified bool   `json:"verified"`
			Mode     string `json:"mode"`
		} `json:"trust"`
	}
	if err := json.Unmarshal(cli("todo", "list", "--json"), &todos); err != nil {
		t.Fatal(err)
	}
	if len(todos) != 3 {
		t.Fatalf("%d todos, want one per delivery: %+v", len(todos), todos)
	}
	for _, td := range todos {
		if td.Queue != "q-"+td.Source.Type || !td.Trust.Verified || td.Trust.Mode != ingest.TrustSigned {
			t.Fatalf("todo %+v", td)
		}
	}
}

// startIngestBinary runs `switchboard serve` on a free loopback port and returns its
// base URL once it says it is listening; it is stopped with SIGTERM at cleanup.
func startIngestBinary(t *testing.T, ctx context.Context, bin string, env []string) string {
	t.Helper()
	return startServeBinary(t, ctx, bin, env).url
}
