package egress

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	p, err := Parse(`{"allow":["API.example.com.","*.example.org"],"networks":["10.20.0.1/16","169.254.169.254/32"]}`)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(p.Allow, ","); got != "api.example.com,*.example.org" {
		t.Errorf("allow = %s", got)
	}
	if p.Networks[0].String() != "10.20.0.0/16" {
		t.Errorf("networks[0] = %s, want it masked", p.Networks[0])
	}
	if p, err := Parse(""); p != nil || err != nil {
		t.Errorf("empty policy = %v, %v; want none", p, err)
	}
	for _, bad := range []string{`{"alow":[]}`, `{"allow":["exa mple.com"]}`, `{"allow":["*"]}`,
		`{"networks":["10.0.0.0"]}`, `{"allow":[]} {}`, `[]`} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%s) succeeded", bad)
		}
	}
}

func TestCheckHost(t *testing.T) {
	g := Guard{Policy: &Policy{Allow: []string{"api.example.com", "*.example.org"}}}
	for host, ok := range map[string]bool{
		"api.example.com": true, "API.example.com.": true, "x.example.org": true, "a.b.example.org": true,
		"example.org": false, "evilexample.org": false, "api.example.com.evil.test": false, "127.0.0.1": false,
	} {
		if err := g.CheckHost(host); (err == nil) != ok {
			t.Errorf("CheckHost(%s) = %v, want allowed %v", host, err, ok)
		}
	}
	if err := (Guard{}).CheckHost("anything.test"); err != nil {
		t.Errorf("no policy refused a host: %v", err)
	}
	if err := (Guard{Policy: &Policy{Allow: []string{}}}).CheckHost("anything.test"); err == nil {
		t.Error("an empty allow list allowed a host")
	}
}

func TestCheckAddrZonedInPolicyNetwork(t *testing.T) {
	g := Guard{Policy: &Policy{Networks: []netip.Prefix{netip.MustParsePrefix("fe80::/10")}}}
	if err := g.CheckAddr(netip.MustParseAddr("fe80::1%eth0")); err != nil {
		t.Errorf("a zoned address in a network the policy names: %v, want allowed", err)
	}
}

func TestCheckAddr(t *testing.T) {
	policy := &Policy{Networks: []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("169.254.169.254/32")}}
	cases := []struct {
		addr                   string
		none, private, withNet bool // allowed with no policy, with allow_private_network, with the policy's networks
	}{
		{"93.184.215.14", true, true, true},
		{"2606:4700::1111", true, true, true},
		{"127.0.0.1", false, true, false},
		{"::1", false, true, false},
		{"::ffff:127.0.0.1", false, true, false},
		{"10.1.2.3", false, true, false},
		{"10.20.9.9", false, true, true},
		{"192.168.1.1", false, true, false},
		{"fd00::1", false, true, false},
		{"169.254.169.254", false, false, true},
		{"169.254.1.1", false, false, false},
		{"fe80::1", false, false, false},
		{"0.0.0.0", false, false, false},
		{"100.64.0.1", false, false, false},
		{"224.0.0.1", false, false, false},
		{"64:ff9b::7f00:1", false, false, false},
		// A zone must not carry an address out of its range (netip's
		// Prefix.Contains is false for any zoned address).
		{"64:ff9b::a9fe:a9fe%eth0", false, false, false},
		{"2001:db8::1%eth0", false, false, false},
		{"fe80::1%eth0", false, false, false},
		// IPv4 forms inside IPv6 that netip's predicates do not see through.
		{"::7f00:1", false, false, false},           // IPv4-compatible 127.0.0.1
		{"::ffff:0:a9fe:a9fe", false, false, false}, // IPv4-translated 169.254.169.254
		{"fec0::1", false, false, false},            // site-local
	}
	for _, c := range cases {
		a := netip.MustParseAddr(c.addr)
		for _, g := range []struct {
			guard Guard
			want  bool
		}{{Guard{}, c.none}, {Guard{AllowPrivate: true}, c.private}, {Guard{Policy: policy}, c.withNet}} {
			if err := g.guard.CheckAddr(a); (err == nil) != g.want {
				t.Errorf("%+v CheckAddr(%s) = %v, want allowed %v", g.guard, a, err, g.want)
			}
		}
	}
}

// listen starts an HTTP server on ip (all of 127.0.0.0/8 is loopback on Linux).
func listen(t *testing.T, ip string, h http.Handler) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", ip+":0")
	if err != nil {
		t.Skipf("cannot listen on %s: %v", ip, err)
	}
	srv := &httptest.Server{Listener: l, Config: &http.Server{Handler: h}}
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// resolveTo answers every lookup with addrs, as a rebinding DNS server would.
func resolveTo(addrs ...string) Resolver {
	return func(context.Context, string, string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
}

func get(t *testing.T, c *http.Client, method, url string) (string, error) {
	t.Helper()
	var body io.Reader
	if method != http.MethodGet {
		body = strings.NewReader("{}")
	}
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b), nil
}

func TestDialerRefusesOutsideTheBoundary(t *testing.T) {
	api := listen(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "api")
	}))
	port := api.Listener.Addr().(*net.TCPAddr).Port
	policy := &Policy{Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")}}

	c := NewClient(&Dialer{Guard: Guard{Policy: policy}, Resolve: resolveTo("127.0.0.2")}, 5*time.Second)
	if body, err := get(t, c, "GET", api.URL); err != nil || body != "api" {
		t.Fatalf("a network the policy names: %q, %v", body, err)
	}
	// The same name resolving to an address outside: refused, whatever the name.
	c = NewClient(&Dialer{Guard: Guard{Policy: policy}, Resolve: resolveTo("127.0.0.1")}, 5*time.Second)
	if _, err := get(t, c, "GET", "http://api.test:"+strconv.Itoa(port)); !IsRefused(err) {
		t.Fatalf("a name resolving to 127.0.0.1: %v, want refused", err)
	}
	// Without the policy's network, loopback is refused unless the capability allows it.
	c = NewClient(&Dialer{Guard: Guard{}}, 5*time.Second)
	if _, err := get(t, c, "GET", api.URL); !IsRefused(err) {
		t.Fatalf("loopback without a policy: %v, want refused", err)
	}
	c = NewClient(&Dialer{Guard: Guard{AllowPrivate: true}}, 5*time.Second)
	if body, err := get(t, c, "GET", api.URL); err != nil || body != "api" {
		t.Fatalf("loopback with allow_private_network: %q, %v", body, err)
	}
	// A name the allowlist does not name is refused before any lookup.
	looked := false
	d := &Dialer{Guard: Guard{Policy: &Policy{Allow: []string{"api.test"}}, AllowPrivate: true},
		Resolve: func(context.Context, string, string) ([]netip.Addr, error) { looked = true; return nil, nil }}
	if _, err := get(t, NewClient(d, 5*time.Second), "GET", "http://other.test:"+strconv.Itoa(port)); !IsRefused(err) || looked {
		t.Fatalf("a host off the allow list: %v (looked up: %v), want refused unresolved", err, looked)
	}
}

func TestRedirects(t *testing.T) {
	inside := listen(t, "127.0.0.3", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "inside"+r.Header.Get("X-Api-Key"))
	}))
	outside := listen(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "outside")
	}))
	var to string
	api := listen(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, to, http.StatusFound)
	}))
	policy := &Policy{Networks: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/31")}} // .2 and .3
	c := NewClient(&Dialer{Guard: Guard{Policy: policy}, Secret: []string{"X-Api-Key"}}, 5*time.Second)

	// Within the policy, to another host: followed, without the credential.
	to = inside.URL
	req, _ := http.NewRequest("GET", api.URL, nil)
	req.Header.Set("X-Api-Key", "secret")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "inside" {
		t.Errorf("a redirect within the policy: %q, want it followed without the API key", body)
	}
	if _, err := get(t, c, "POST", api.URL); !IsRefused(err) {
		t.Errorf("a POST redirected: %v, want refused", err)
	}
	for _, target := range []string{outside.URL, "http://169.254.169.254/latest/meta-data/", "file:///etc/passwd"} {
		to = target
		if body, err := get(t, c, "GET", api.URL); !IsRefused(err) {
			t.Errorf("a redirect to %s: %q, %v; want refused", target, body, err)
		}
	}
	to = api.URL // a loop
	if _, err := get(t, c, "GET", api.URL); !IsRefused(err) {
		t.Errorf("endless redirects: %v, want refused", err)
	}
}

// A redirect from https to http would send the request, its credential among
// its headers, in clear: refused, whatever the host.
func TestRedirectDowngradeRefused(t *testing.T) {
	var got string
	plain := listen(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization") + r.Header.Get("X-Api-Key")
		io.WriteString(w, "plain")
	}))
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("cannot listen on 127.0.0.2: %v", err)
	}
	tlsSrv := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, plain.URL+"/x", http.StatusFound)
	})}}
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)

	c := NewClient(&Dialer{Guard: Guard{AllowPrivate: true}, Secret: []string{"X-Api-Key"}}, 5*time.Second)
	c.Transport.(*http.Transport).TLSClientConfig = tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig
	req, _ := http.NewRequest("GET", tlsSrv.URL, nil)
	req.Header.Set("Authorization", "Bearer secret")
	req.Header.Set("X-Api-Key", "secret")
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	if !IsRefused(err) || got != "" {
		t.Fatalf("https redirected to http: %v (the plain server got %q), want refused", err, got)
	}
}

// An answer's headers are capped far below net/http's default of 10 MB.
func TestHugeResponseHeaderRefused(t *testing.T) {
	api := listen(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Big", strings.Repeat("a", 2<<20))
		io.WriteString(w, "ok")
	}))
	c := NewClient(&Dialer{Guard: Guard{AllowPrivate: true}}, 5*time.Second)
	if body, err := get(t, c, "GET", api.URL); err == nil || !strings.Contains(err.Error(), "header") {
		t.Fatalf("a 2 MB header: %q, %v; want an error about the headers", body, err)
	}
}

// The docs say an IP address in a URL is a name the allowlist must name: an
// IPv6 one can be named too, in any of its spellings.
func TestAllowIPv6Literal(t *testing.T) {
	p, err := Parse(`{"allow":["FD00:0::5", "10.0.0.5"]}`)
	if err != nil {
		t.Fatalf("an IPv6 address in allow: %v", err)
	}
	g := Guard{Policy: p}
	for host, ok := range map[string]bool{"fd00::5": true, "fd00:0:0::5": true, "10.0.0.5": true, "fd00::6": false} {
		if err := g.CheckHost(host); (err == nil) != ok {
			t.Errorf("CheckHost(%s) = %v, want allowed %v", host, err, ok)
		}
	}
}

// A proxy named in the environment is never used: the connection goes where
// the checks looked, and a refused destination stays refused.
func TestEnvironmentProxyIgnored(t *testing.T) {
	var proxied atomic.Bool
	proxy := listen(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Store(true)
		io.WriteString(w, "proxy")
	}))
	t.Setenv("HTTP_PROXY", proxy.URL)
	t.Setenv("http_proxy", proxy.URL)
	t.Setenv("NO_PROXY", "")
	api := listen(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "api")
	}))
	c := NewClient(&Dialer{Guard: Guard{}}, 5*time.Second)
	if body, err := get(t, c, "GET", api.URL); !IsRefused(err) || proxied.Load() {
		t.Fatalf("loopback with HTTP_PROXY set: %q, %v (proxied: %v), want refused without the proxy", body, err, proxied.Load())
	}
	c = NewClient(&Dialer{Guard: Guard{AllowPrivate: true}}, 5*time.Second)
	if body, err := get(t, c, "GET", api.URL); err != nil || body != "api" || proxied.Load() {
		t.Fatalf("with HTTP_PROXY set: %q, %v (proxied: %v), want the api directly", body, err, proxied.Load())
	}
}

// net/http keeps Authorization on a redirect to the same host name on another
// port (another server): the credential stays with the host:port it was for.
func TestRedirectToAnotherPortDropsAuthorization(t *testing.T) {
	var got atomic.Value
	other := listen(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got.Store(r.Header.Get("Authorization"))
		io.WriteString(w, "other")
	}))
	api := listen(t, "127.0.0.2", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/x", http.StatusFound)
	}))
	c := NewClient(&Dialer{Guard: Guard{AllowPrivate: true}}, 5*time.Second)
	req, _ := http.NewRequest("GET", api.URL, nil)
	req.Header.Set("Authorization", "Bearer secret")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if v, _ := got.Load().(string); v != "" {
		t.Fatalf("the server on another port got Authorization %q, want none", v)
	}
}

// TestRefusalSaysWhatWouldAllowIt: a refused address names the setting that
// would let it through, not a policy the operator may never have written.
func TestRefusalSaysWhatWouldAllowIt(t *testing.T) {
	for _, c := range []struct {
		guard     Guard
		addr      string
		want, not string
	}{
		{Guard{}, "127.0.0.1", `"allow_private_network": true`, "egress policy does not name"},
		{Guard{}, "10.1.2.3", `"allow_private_network": true`, "egress policy does not name"},
		{Guard{AllowPrivate: true}, "169.254.169.254", "the egress policy's networks", "allow_private_network"},
		{Guard{}, "100.64.0.1", "the egress policy's networks", "allow_private_network"},
	} {
		err := c.guard.CheckAddr(netip.MustParseAddr(c.addr))
		if err == nil || !IsRefused(err) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), c.not) {
			t.Errorf("%s refused with %v; want %q in it, not %q", c.addr, err, c.want, c.not)
		}
	}
}
