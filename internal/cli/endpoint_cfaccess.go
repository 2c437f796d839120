package cli

import "github.com/switchboardhq/switchboard/store"

// stringValue is a string flag that remembers whether it was given ("" too).
type stringValue struct {
	set bool
	v   string
}

func (s *stringValue) String() string     { return s.v }
func (s *stringValue) Set(v string) error { s.set, s.v = true, v; return nil }

func (s *stringValue) ptr() *string {
	if !s.set {
		return nil
	}
	v := s.v
	return &v
}

const cfAccessIdentityUsage = "the Cloudflare Access identity whose verified requests act as this endpoint: " +
	"a person's email, or a service token's client id (\"\" clears it; serve needs --cf-access-team-domain)"

// accessColumn is the endpoint's Cloudflare Access identity in endpoint list.
func accessColumn(e store.Endpoint) string {
	if e.CFAccessIdentity == "" {
		return "-"
	}
	return printable(e.CFAccessIdentity)
}
