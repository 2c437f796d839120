package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboardhq/switchboard/modules"
)

const petstoreSpec = "../../modules/testdata/openapi/petstore3.json"

// TestModulesImportOpenAPI: the manifest written for the Petstore loads as a
// rest capability; what it left out is said on stderr.
func TestModulesImportOpenAPI(t *testing.T) {
	code, out, stderr := cli(t, "", "modules", "import-openapi", petstoreSpec, "--name", "petstore",
		"--base-url", "https://petstore3.example.test/api/v3")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stderr, "left out uploadFile: its request body is not JSON") {
		t.Errorf("stderr = %s", stderr)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "petstore.json"), []byte(out), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PETSTORE_API_KEY", "k")
	ms, err := modules.LoadDir(dir, modules.LoadOptions{})
	if err != nil || len(ms) != 1 || ms[0].Type != modules.TypeREST || len(ms[0].Operations) != 16 {
		t.Fatalf("the written manifest: %v, %+v", err, ms)
	}
}

func TestModulesImportOpenAPIBadInput(t *testing.T) {
	notJSON := filepath.Join(t.TempDir(), "spec.json")
	if err := os.WriteFile(notJSON, []byte("openapi: [unclosed"), 0o600); err != nil {
		t.Fatal(err)
	}
	// No operation can be imported: stderr says why, not only that.
	unsendable := filepath.Join(t.TempDir(), "unsendable.json")
	if err := os.WriteFile(unsendable, []byte(`{"openapi":"3.0.3","info":{"title":"S","version":"1"},
		"paths":{"/items":{"get":{"operationId":"list","parameters":[{"name":"filter","in":"query","style":"deepObject",
		"schema":{"type":"object"}}],"responses":{"200":{"description":"ok"}}}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{unsendable, "--name", "s", "--base-url", "http://x.test"}, 1, `left out list: query parameter "filter"`},
		{[]string{petstoreSpec}, 2, "--name is required"},
		{[]string{"--name", "petstore"}, 2, "want SPEC.json"},
		{[]string{petstoreSpec, "--name", "petstore"}, 1, `base URL "/api/v3"`},
		{[]string{petstoreSpec, "--name", "petstore", "--base-url", "http://x.test", "--operations", "getPetById,nope"}, 1, `no operation "nope"`},
		{[]string{filepath.Join(t.TempDir(), "absent.json"), "--name", "petstore"}, 1, "no such file"},
		{[]string{notJSON, "--name", "petstore", "--base-url", "http://x.test"}, 1, "read the OpenAPI document"},
	} {
		code, out, stderr := cli(t, "", append([]string{"modules", "import-openapi"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) || out != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d and %q", c.args, code, out, stderr, c.code, c.want)
		}
	}
}
