package store

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// Webhook signing secrets must be recoverable (the receiver recomputes the provider's
// HMAC), so they cannot be hashed like credentials. With a key configured they are
// sealed with AES-256-GCM before they reach the file, and the key lives somewhere
// else (environment, systemd credential), so a copy of the database alone yields no
// live secret. Without a key they are stored as plaintext, and a store with a key
// still reads plaintext rows, so turning encryption on strands nothing.

// sealedPrefix marks a sealed value; the version lets a later format coexist.
const sealedPrefix = "enc:v1:"

// SecretKeySize is the size of the AES-256 key.
const SecretKeySize = 32

// ErrSecretKey: the configured key does not open the sealed secrets, or sealed
// secrets exist and no key is configured.
var ErrSecretKey = errors.New("webhook secrets and the secret encryption key do not match")

// ParseSecretKey decodes a 32-byte key written as hex (64 digits) or base64
// (standard or URL alphabet, padded or not). Surrounding whitespace (a trailing
// newline in a key file) is ignored.
func ParseSecretKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, fmt.Errorf("store: secret key is empty")
	}
	if len(s) == 2*SecretKeySize {
		if k, err := hex.DecodeString(s); err == nil {
			return k, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != SecretKeySize {
				return nil, fmt.Errorf("store: secret key decodes to %d bytes, want %d (generate one with: openssl rand -base64 32)", len(k), SecretKeySize)
			}
			return k, nil
		}
	}
	return nil, fmt.Errorf("store: secret key is neither 64 hex digits nor base64 of %d bytes (generate one with: openssl rand -base64 32)", SecretKeySize)
}

// SecretBox seals and opens secrets. A nil *SecretBox has no key: it stores
// plaintext and opens only plaintext.
type SecretBox struct {
	aead     cipher.AEAD   // seals, and opens first
	previous []cipher.AEAD // open only: keys being rotated out
}

// NewSecretBox returns a box for a 32-byte key. Previous keys, during a key
// rotation, still open what they sealed; only key seals.
func NewSecretBox(key []byte, previous ...[]byte) (*SecretBox, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, fmt.Errorf("store: secret key: %w", err)
	}
	b := &SecretBox{aead: aead}
	for _, k := range previous {
		old, err := newAEAD(k)
		if err != nil {
			return nil, fmt.Errorf("store: previous secret key: %w", err)
		}
		b.previous = append(b.previous, old)
	}
	return b, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != SecretKeySize {
		return nil, fmt.Errorf("it is %d bytes, want %d", len(key), SecretKeySize)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

// Sealed reports whether a stored value is sealed rather than plaintext.
func Sealed(stored string) bool { return strings.HasPrefix(stored, sealedPrefix) }

// Seal returns the stored form of secret, bound to ad (the owning row) so that a
// sealed value copied into another row does not open. Without a key it is the
// plaintext itself.
func (b *SecretBox) Seal(secret, ad string) (string, error) {
	if b == nil {
		return secret, nil
	}
	nonce := make([]byte, b.aead.NonceSize(), b.aead.NonceSize()+len(secret)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("store: seal secret: %w", err)
	}
	out := b.aead.Seal(nonce, nonce, []byte(secret), []byte(ad))
	return sealedPrefix + base64.StdEncoding.EncodeToString(out), nil
}

// Open returns the secret a stored value holds. Values without the marker are
// legacy plaintext and pass through. A sealed value needs the key it was sealed
// with (the current one or a previous one) and the same ad; anything else is
// ErrSecretKey.
func (b *SecretBox) Open(stored, ad string) (string, error) {
	plain, _, err := b.open(stored, ad)
	return plain, err
}

// open is Open that also says whether stored is sealed with the current key: what
// ReencryptSecrets leaves alone.
func (b *SecretBox) open(stored, ad string) (plain string, current bool, err error) {
	if !Sealed(stored) {
		return stored, false, nil
	}
	if b == nil {
		return "", false, fmt.Errorf("store: secret of %s is encrypted and no key is configured: %w", ad, ErrSecretKey)
	}
	raw, err := base64.StdEncoding.DecodeString(stored[len(sealedPrefix):])
	if err != nil || len(raw) < b.aead.NonceSize()+b.aead.Overhead() {
		return "", false, fmt.Errorf("store: secret of %s is not a well-formed sealed value: %w", ad, ErrSecretKey)
	}
	ns := b.aead.NonceSize()
	if p, err := b.aead.Open(nil, raw[:ns], raw[ns:], []byte(ad)); err == nil {
		return string(p), true, nil
	}
	for _, old := range b.previous {
		if p, err := old.Open(nil, raw[:ns], raw[ns:], []byte(ad)); err == nil {
			return string(p), false, nil
		}
	}
	return "", false, fmt.Errorf("store: secret of %s does not open with the configured key (wrong key, or the value was moved from another row): %w", ad, ErrSecretKey)
}
