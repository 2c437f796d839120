package store

import (
	"bytes"
	"context"
	"path/filepath"
	"testing"
)

// A secret is made once and kept: the same bytes after a reopen, others under
// another name.
func TestSecretIsMadeOnceAndKept(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sb.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Secret(ctx, "device-cookie")
	if err != nil || len(a) != 32 {
		t.Fatalf("Secret = %x, %v", a, err)
	}
	other, _ := s.Secret(ctx, "other")
	if bytes.Equal(a, other) {
		t.Fatal("two names, one secret")
	}
	s.Close()
	s, err = Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if again, err := s.Secret(ctx, "device-cookie"); err != nil || !bytes.Equal(a, again) {
		t.Fatalf("after a reopen: %x, %v; want %x", again, err, a)
	}
}
