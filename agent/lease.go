package agent

import (
	"math"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// The lease contract's numbers. The instructions, the tool descriptions and the
// schema text are built from these, and a test pins them together.
const (
	// DefaultLeaseSeconds is the lease a claim gets when neither the call nor the
	// endpoint says otherwise.
	DefaultLeaseSeconds = 300
	// MaxLeaseSeconds bounds any lease: longer requests are cut to it.
	MaxLeaseSeconds = 86400
)

// leaseTTL is the one rule for the length of a lease: the per-call
// lease_ttl_seconds, cut to MaxLeaseSeconds; else the endpoint's default; else
// DefaultLeaseSeconds. A requested lease that is not a whole number of seconds of
// at least 1 is an invalid argument rather than a silent default, because a worker
// that asked for an hour must not get five minutes.
func leaseTTL(requested *float64, endpointDefault int) (time.Duration, error) {
	if requested != nil {
		v := *requested
		if math.IsNaN(v) || v < 1 || v != math.Trunc(v) {
			return 0, errorf(CodeInvalidArgument, "lease_ttl_seconds must be a whole number of seconds, at least 1 (more than %d is cut to %d), not %v",
				MaxLeaseSeconds, MaxLeaseSeconds, v)
		}
		return time.Duration(min(v, MaxLeaseSeconds)) * time.Second, nil
	}
	return time.Duration(effectiveDefault(endpointDefault)) * time.Second, nil
}

// effectiveDefault is the lease in seconds a call without lease_ttl_seconds gets.
func effectiveDefault(endpointDefault int) int {
	if endpointDefault > 0 {
		return min(endpointDefault, MaxLeaseSeconds)
	}
	return DefaultLeaseSeconds
}

// lease resolves the lease for a call by endpoint ep. ep is the endpoint as read
// for this request (Call.Endpoint), so a human's edit of its default lease
// applies to the next claim without a reconnect.
func lease(ep store.Endpoint, requested *float64) (time.Duration, error) {
	if requested != nil {
		return leaseTTL(requested, 0)
	}
	return leaseTTL(nil, ep.DefaultLeaseTTL)
}
