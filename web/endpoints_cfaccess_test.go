package web

import (
	"fmt"
	"strings"
	"testing"
)

// The Endpoints page shows which Cloudflare Access identity acts as an
// endpoint, on that endpoint's row only.
func TestEndpointListShowsCloudflareAccessIdentity(t *testing.T) {
	f := newFixture(t, Options{})
	spec := endpointSpec([]string{"inbox"})
	ana := "ana@example.com"
	spec.CFAccessIdentity = &ana
	withAccess, _, err := f.st.CreateEndpoint(t.Context(), "ana", spec, "test")
	if err != nil {
		t.Fatal(err)
	}
	plain, _, err := f.st.CreateEndpoint(t.Context(), "bob", endpointSpec([]string{"inbox"}), "test")
	if err != nil {
		t.Fatal(err)
	}
	cookie, _ := f.login()
	_, body := f.get("/endpoints", cookie)
	row := func(id int64) string {
		start := strings.Index(body, fmt.Sprintf(`data-endpoint-id="%d"`, id))
		if start < 0 {
			t.Fatalf("no row for endpoint %d", id)
		}
		return body[start : start+strings.Index(body[start:], "</tr>")]
	}
	if !strings.Contains(row(withAccess.ID), "Cloudflare Access: ana@example.com") {
		t.Errorf("the row of the endpoint with an identity lacks it:\n%s", row(withAccess.ID))
	}
	if strings.Contains(row(plain.ID), "Cloudflare Access") {
		t.Errorf("the row of an endpoint without an identity mentions Cloudflare Access:\n%s", row(plain.ID))
	}
}
