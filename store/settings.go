package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/base64"
	"fmt"
)

// Secret returns the random 32-byte secret kept under name in settings, made the
// first time it is asked for: a key the server needs across restarts that is no
// one's to configure (the board's device cookies are signed with one). With a
// secret encryption key it is sealed as webhook secrets are, so that a copy of
// the database alone cannot forge what it signs; one made before the key was
// configured is sealed when a store opens with the key (sealSettingSecrets).
func (s *Store) Secret(ctx context.Context, name string) ([]byte, error) {
	key := settingSecretPrefix + name
	var value string
	err := s.queryRow(ctx, `SELECT value FROM settings WHERE name = ?`, key).Scan(&value)
	if notFound(err) {
		fresh := make([]byte, 32)
		rand.Read(fresh) // never fails (crypto/rand panics rather than return short)
		var stored string
		if stored, err = s.box.Seal(base64.StdEncoding.EncodeToString(fresh), key); err != nil {
			return nil, err
		}
		err = s.write(ctx, func(w *wtx) error {
			// Another process may have made it meanwhile: the first one stands.
			if _, err := w.exec(`INSERT OR IGNORE INTO settings (name, value) VALUES (?, ?)`, key, stored); err != nil {
				return err
			}
			return w.queryRow(`SELECT value FROM settings WHERE name = ?`, key).Scan(&value)
		})
	}
	if err != nil {
		return nil, fmt.Errorf("store: secret %s: %w", name, err)
	}
	plain, err := s.box.Open(value, key)
	if err != nil {
		return nil, err
	}
	b, err := base64.StdEncoding.DecodeString(plain)
	if err != nil || len(b) != 32 {
		return nil, fmt.Errorf("store: secret %s is not 32 bytes of base64", name)
	}
	return b, nil
}

// settingSecretPrefix starts the settings names Secret keeps its secrets under;
// the name is also what a sealed one is bound to.
const settingSecretPrefix = "secret:"

// settingSecret is one secret Secret keeps, as stored.
type settingSecret struct{ name, value string }

func scanSettingSecrets(rows *sql.Rows, err error) ([]settingSecret, error) {
	if err != nil {
		return nil, fmt.Errorf("store: read settings secrets: %w", err)
	}
	defer rows.Close()
	var out []settingSecret
	for rows.Next() {
		var sec settingSecret
		if err := rows.Scan(&sec.name, &sec.value); err != nil {
			return nil, fmt.Errorf("store: read settings secrets: %w", err)
		}
		out = append(out, sec)
	}
	return out, rows.Err()
}

const settingSecretsQuery = `SELECT name, value FROM settings WHERE substr(name, 1, 7) = 'secret:' ORDER BY name`

// checkSettingSecrets is CheckSecrets for the secrets Secret keeps: each sealed
// one opens with the configured key.
func (s *Store) checkSettingSecrets(ctx context.Context) error {
	held, err := scanSettingSecrets(s.query(ctx, settingSecretsQuery))
	if err != nil {
		return err
	}
	for _, sec := range held {
		if _, err := s.box.Open(sec.value, sec.name); err != nil {
			return fmt.Errorf("store: the configured secret encryption key does not open %s in %s; is it the key "+
				"it was encrypted with? (to rotate keys, give the old one as the previous key until secrets "+
				"reencrypt has run): %w", sec.name, s.path, ErrSecretKey)
		}
	}
	return nil
}

// sealSettingSecrets seals with the configured key every secret Secret keeps that
// it does not seal yet: one made before a key was configured, or during a key
// rotation one the previous key sealed. It returns how many it sealed.
func (w *wtx) sealSettingSecrets(box *SecretBox) (int, error) {
	held, err := scanSettingSecrets(w.query(settingSecretsQuery))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sec := range held {
		plain, current, err := box.open(sec.value, sec.name)
		if err != nil {
			return 0, err
		}
		if current {
			continue
		}
		sealed, err := box.Seal(plain, sec.name)
		if err != nil {
			return 0, err
		}
		if _, err := w.exec(`UPDATE settings SET value = ? WHERE name = ?`, sealed, sec.name); err != nil {
			return 0, fmt.Errorf("store: seal %s: %w", sec.name, err)
		}
		n++
	}
	return n, nil
}
