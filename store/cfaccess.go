package store

import (
	"context"
	"fmt"
	"strings"
	"unicode"
)

// maxCFAccessIdentity bounds an identity: an email address is at most 320 bytes.
const maxCFAccessIdentity = 320

// An endpoint's CFAccessIdentity is the Cloudflare Access identity whose
// verified requests act as it: a person's email, or a service token's client
// id (its common_name); "" = none.

// NormalizeCFAccessIdentity is the stored spelling of a Cloudflare Access
// identity as an operator gives it (an email, or a service token's client id):
// trimmed, its ASCII letters lower-cased (foldIdentity).
func NormalizeCFAccessIdentity(s string) string {
	return foldIdentity(strings.TrimSpace(s))
}

// foldIdentity lower-cases the ASCII letters of an identity and nothing else.
// Email providers treat addresses case-blind and Access passes on what the
// identity provider said, so "Ana@Example.com" and "ana@example.com" are one.
// Unicode lower-casing would also map other letters onto ASCII ones (the
// Kelvin sign U+212A onto k), making an address someone else could register
// at their identity provider answer for another's endpoint.
func foldIdentity(s string) string { return lowerASCII(s) }

// checkCFAccessIdentity refuses an identity no assertion could carry. nil
// (unchanged) and "" (cleared) are fine.
func checkCFAccessIdentity(p *string) error {
	if p == nil {
		return nil
	}
	s := NormalizeCFAccessIdentity(*p)
	if len(s) > maxCFAccessIdentity {
		return fmt.Errorf("Cloudflare Access identity is longer than %d bytes: %w", maxCFAccessIdentity, ErrInvalid)
	}
	for _, r := range s {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return fmt.Errorf("Cloudflare Access identity %.80q holds a space or a control character (give an email or a service token's client id): %w", s, ErrInvalid)
		}
	}
	return nil
}

// cfAccessValue is the column's value for an identity: NULL for none.
func cfAccessValue(identity string) any {
	if identity = NormalizeCFAccessIdentity(identity); identity != "" {
		return identity
	}
	return nil
}

// cfAccessTaken is the error for an identity another live endpoint answers for.
func cfAccessTaken(id int64, err error) error {
	if isUnique(err) {
		return fmt.Errorf("store: endpoint %d: that Cloudflare Access identity belongs to another live endpoint: %w", id, ErrAlreadyExists)
	}
	return fmt.Errorf("store: endpoint %d: set Cloudflare Access identity: %w", id, err)
}

// setCFAccessIdentity sets the identity of the endpoint id, inside its
// creation's transaction; nil leaves it unset.
func (w *wtx) setCFAccessIdentity(id int64, identity *string) error {
	if identity == nil || NormalizeCFAccessIdentity(*identity) == "" {
		return nil
	}
	if _, err := w.exec(`UPDATE endpoints SET cf_access_identity = ? WHERE id = ?`, cfAccessValue(*identity), id); err != nil {
		return cfAccessTaken(id, err)
	}
	return nil
}

// EndpointByCFAccessIdentity resolves a verified Cloudflare Access identity to
// the live endpoint that answers for it; none is ErrNotFound. Like
// EndpointByCredential, it answers from the cache while no endpoint changed, so a
// revocation or an edit applies as EndpointByCredential says.
func (s *Store) EndpointByCFAccessIdentity(ctx context.Context, identity string) (Endpoint, error) {
	// Folded, not trimmed: a verified identity is matched as Access sent it.
	identity = foldIdentity(identity)
	if identity == "" {
		return Endpoint{}, fmt.Errorf("store: Cloudflare Access identity: empty: %w", ErrNotFound)
	}
	// A key no credential's hash can be: credentials start with "sb_".
	key := HashCredential("cf-access\x00" + identity)
	return s.liveEndpointBy(ctx, key, "Cloudflare Access identity", `cf_access_identity = ?`, identity)
}
