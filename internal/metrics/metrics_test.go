package metrics

import (
	"net/http/httptest"
	"strings"
	"testing"
)

func TestMetricsRefuseOtherAddresses(t *testing.T) {
	allow, err := ParseCIDRs("127.0.0.0/8,::1,10.1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	m := &Metrics{allow: allow}
	for _, c := range []struct {
		remote string
		fwd    []string
		ok     bool
	}{
		{"127.0.0.1:5000", nil, true},
		{"[::1]:5000", nil, true},
		{"10.1.2.3:5000", nil, true},
		{"192.168.1.9:5000", nil, false},
		{"127.0.0.1:5000", []string{"203.0.113.7"}, false}, // a reverse proxy forwarding the internet
		{"127.0.0.1:5000", []string{"10.1.2.3"}, true},
		// A client's forged line, then the line its proxy added (HAProxy's
		// option forwardfor): every line counts, not the first alone.
		{"127.0.0.1:5000", []string{"127.0.0.1", "203.0.113.7"}, false},
	} {
		r := httptest.NewRequest("GET", "/metrics", nil)
		r.RemoteAddr = c.remote
		for _, f := range c.fwd {
			r.Header.Add("X-Forwarded-For", f)
		}
		if got := m.Allowed(r); got != c.ok {
			t.Errorf("remote %s forwarded-for %q: allowed=%v, want %v", c.remote, c.fwd, got, c.ok)
		}
	}
	if _, err := ParseCIDRs("not-an-ip"); err == nil || !strings.Contains(err.Error(), `"not-an-ip" is not`) {
		t.Errorf("a bad allow entry: %v, want it refused as given", err)
	}
}
