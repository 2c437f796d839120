package store

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
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

// settingValue reads a setting as stored.
func settingValue(t *testing.T, s *Store, name string) string {
	t.Helper()
	var v string
	if err := s.queryRow(context.Background(), `SELECT value FROM settings WHERE name = ?`, name).Scan(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// With a secret encryption key the device-cookie key is sealed like webhook
// secrets: one made before the key is sealed when the store opens with it, the
// bytes stay the same across restarts and a key rotation, and a wrong key stops
// the store from opening rather than forge-proof cookies silently failing.
func TestSecretIsSealedWithTheSecretKey(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sb.db")
	key, newKey, wrong := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32), bytes.Repeat([]byte{3}, 32)
	open := func(opts Options) *Store {
		t.Helper()
		opts.Logger = slog.New(slog.DiscardHandler)
		s, err := Open(ctx, path, opts)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	secret := func(s *Store) []byte {
		t.Helper()
		b, err := s.Secret(ctx, "device-cookie")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	s := open(Options{})
	first := secret(s)
	if Sealed(settingValue(t, s, "secret:device-cookie")) {
		t.Fatal("sealed without a key")
	}
	s.Close()

	for _, opts := range []Options{{SecretKey: key}, {SecretKey: key}, {SecretKey: newKey, PreviousSecretKeys: [][]byte{key}}} {
		s = open(opts)
		if v := settingValue(t, s, "secret:device-cookie"); !Sealed(v) || strings.Contains(v, base64.StdEncoding.EncodeToString(first)) {
			t.Fatalf("stored with a key configured: %q", v)
		}
		if got := secret(s); !bytes.Equal(got, first) {
			t.Fatalf("after a restart with the key: %x, want %x", got, first)
		}
		s.Close()
	}
	if _, err := Open(ctx, path, Options{SecretKey: wrong, Logger: slog.New(slog.DiscardHandler)}); !errors.Is(err, ErrSecretKey) {
		t.Fatalf("Open with another key = %v, want ErrSecretKey", err)
	}
	// Without the key, serve's check refuses to start, and the secret does not open.
	s = open(Options{})
	if err := s.CheckSecrets(ctx); !errors.Is(err, ErrSecretKey) {
		t.Fatalf("CheckSecrets without the key = %v, want ErrSecretKey", err)
	}
	if _, err := s.Secret(ctx, "device-cookie"); !errors.Is(err, ErrSecretKey) {
		t.Fatalf("Secret without the key = %v, want ErrSecretKey", err)
	}
	s.Close()
	s = open(Options{SecretKey: newKey})
	defer s.Close()
	if got := secret(s); !bytes.Equal(got, first) {
		t.Fatalf("with the new key alone after the rotation: %x, want %x", got, first)
	}

	// A database keyed from the start never holds it as plaintext.
	fresh, err := Open(ctx, filepath.Join(t.TempDir(), "fresh.db"), Options{SecretKey: key, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	secret(fresh)
	if v := settingValue(t, fresh, "secret:device-cookie"); !Sealed(v) {
		t.Fatalf("made with a key configured: %q", v)
	}
}
