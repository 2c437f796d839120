package store

import (
	"context"
	"errors"
	"testing"
)

// An endpoint's Cloudflare Access identity is stored lower-cased, found by any
// spelling, unique among live endpoints (a clash writes nothing), free again
// once its endpoint is revoked, cleared by "", and never finds a revoked one.
func TestCFAccessIdentity(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	q := []string{"inbox"}
	ana := "Ana@Example.com "
	a, _, err := s.CreateEndpoint(ctx, "ana", EndpointSpec{Queues: &q, CFAccessIdentity: &ana}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	if a.CFAccessIdentity != "ana@example.com" {
		t.Fatalf("stored identity %q, want it trimmed and lower-cased", a.CFAccessIdentity)
	}
	got, err := s.EndpointByCFAccessIdentity(ctx, "ANA@example.com")
	if err != nil || got.ID != a.ID {
		t.Fatalf("look up by identity: %+v, %v; want endpoint %d", got, err, a.ID)
	}

	// A second live endpoint may not take it, at creation or by an update.
	if _, _, err := s.CreateEndpoint(ctx, "bob", EndpointSpec{Queues: &q, CFAccessIdentity: &ana}, "human:1"); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("second endpoint with the same identity: %v, want ErrAlreadyExists", err)
	}
	if eps, err := s.ListEndpoints(ctx, true); err != nil || len(eps) != 1 {
		t.Fatalf("after the refused creation: %d endpoints (%v), want 1: nothing half-written", len(eps), err)
	}
	b, _, err := s.CreateEndpoint(ctx, "bob", EndpointSpec{Queues: &q}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateEndpoint(ctx, b.ID, EndpointSpec{CFAccessIdentity: &ana}, "human:1"); !errors.Is(err, ErrAlreadyExists) {
		t.Fatalf("update to a taken identity: %v, want ErrAlreadyExists", err)
	}
	bad := "ana @example.com"
	if _, err := s.UpdateEndpoint(ctx, b.ID, EndpointSpec{CFAccessIdentity: &bad}, "human:1"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("identity with a space: %v, want ErrInvalid", err)
	}

	// Revoked, the identity finds nothing and is free for another endpoint.
	if err := s.RevokeEndpoint(ctx, a.ID, "human:1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.EndpointByCFAccessIdentity(ctx, "ana@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("identity of a revoked endpoint: %v, want ErrNotFound", err)
	}
	b, err = s.UpdateEndpoint(ctx, b.ID, EndpointSpec{CFAccessIdentity: &ana}, "human:1")
	if err != nil || b.CFAccessIdentity != "ana@example.com" {
		t.Fatalf("identity of a revoked endpoint taken over: %+v, %v", b, err)
	}
	if got, err := s.EndpointByCFAccessIdentity(ctx, "ana@example.com"); err != nil || got.ID != b.ID {
		t.Fatalf("look up after the takeover: %+v, %v; want endpoint %d", got, err, b.ID)
	}
	none := ""
	if b, err = s.UpdateEndpoint(ctx, b.ID, EndpointSpec{CFAccessIdentity: &none}, "human:1"); err != nil || b.CFAccessIdentity != "" {
		t.Fatalf("clearing the identity: %+v, %v", b, err)
	}
	if _, err := s.EndpointByCFAccessIdentity(ctx, "ana@example.com"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("cleared identity: %v, want ErrNotFound", err)
	}
}

// Only ASCII letters fold: the identity comes from whatever the identity
// provider let its user write, and Unicode lower-casing maps other letters onto
// ASCII ones (the Kelvin sign K, U+212A, lower-cases to k). An assertion for
// "\u212Aate@example.com" is not Kate's, nor is one whose email carries a space.
func TestCFAccessIdentityFoldsOnlyASCII(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	q := []string{"inbox"}
	kate := "Kate@Example.com"
	k, _, err := s.CreateEndpoint(ctx, "kate", EndpointSpec{Queues: &q, CFAccessIdentity: &kate}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := s.EndpointByCFAccessIdentity(ctx, "KATE@example.COM"); err != nil || got.ID != k.ID {
		t.Fatalf("ASCII case: %+v, %v; want endpoint %d", got, err, k.ID)
	}
	for _, other := range []string{"\u212Aate@example.com", " kate@example.com", "kate@example.com\n"} {
		if got, err := s.EndpointByCFAccessIdentity(ctx, other); !errors.Is(err, ErrNotFound) {
			t.Fatalf("identity %+q found endpoint %d (%v), want ErrNotFound", other, got.ID, err)
		}
	}
	// The two spellings are two identities: both may be given, to two endpoints.
	kelvin := "\u212Aate@example.com"
	o, _, err := s.CreateEndpoint(ctx, "other", EndpointSpec{Queues: &q, CFAccessIdentity: &kelvin}, "human:1")
	if err != nil {
		t.Fatalf("endpoint for %q: %v", kelvin, err)
	}
	if got, err := s.EndpointByCFAccessIdentity(ctx, kelvin); err != nil || got.ID != o.ID {
		t.Fatalf("look up %q: %+v, %v; want endpoint %d", kelvin, got, err, o.ID)
	}
}
