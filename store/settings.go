package store

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// Secret returns the random 32-byte secret kept under name in settings, made the
// first time it is asked for: a key the server needs across restarts that is no
// one's to configure (the board's device cookies are signed with one). Whoever
// reads the database reads it too, as they read everything it protects.
func (s *Store) Secret(ctx context.Context, name string) ([]byte, error) {
	key := "secret:" + name
	var value string
	err := s.queryRow(ctx, `SELECT value FROM settings WHERE name = ?`, key).Scan(&value)
	if notFound(err) {
		fresh := make([]byte, 32)
		rand.Read(fresh) // never fails (crypto/rand panics rather than return short)
		err = s.write(ctx, func(w *wtx) error {
			// Another process may have made it meanwhile: the first one stands.
			if _, err := w.exec(`INSERT OR IGNORE INTO settings (name, value) VALUES (?, ?)`,
				key, base64.StdEncoding.EncodeToString(fresh)); err != nil {
				return err
			}
			return w.queryRow(`SELECT value FROM settings WHERE name = ?`, key).Scan(&value)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("store: secret %s: %w", name, err)
	}
	b, err := base64.StdEncoding.DecodeString(value)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("store: secret %s is not 32 bytes of base64", name)
	}
	return b, nil
}
