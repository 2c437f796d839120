package store

import (
	"context"
	"database/sql"
	"fmt"
)

// Key handling for the stored signing secrets: whether a key has been used with
// this database, checking that every sealed secret opens with the configured key,
// and sealing the plaintext ones.

// storedSecret is one secret column of one row.
type storedSecret struct {
	id     int64
	column string
	value  string
}

// secretsQuery selects every secret still held (deleted webhooks hold none).
const secretsQuery = `SELECT id, signing_secret, previous_secret FROM webhooks WHERE deleted_at IS NULL ORDER BY id`

// storedSecrets reads every secret still held.
func (s *Store) storedSecrets(ctx context.Context) ([]storedSecret, error) {
	rows, err := s.query(ctx, secretsQuery)
	if err != nil {
		return nil, fmt.Errorf("store: read webhook secrets: %w", err)
	}
	return scanSecrets(rows)
}

// scanSecrets reads secretsQuery's rows, one storedSecret per held column, and
// closes them.
func scanSecrets(rows *sql.Rows) ([]storedSecret, error) {
	defer rows.Close()
	var out []storedSecret
	for rows.Next() {
		var id int64
		var cur string
		var prev sql.NullString
		if err := rows.Scan(&id, &cur, &prev); err != nil {
			return nil, fmt.Errorf("store: read webhook secrets: %w", err)
		}
		out = append(out, storedSecret{id: id, column: "signing_secret", value: cur})
		if prev.Valid {
			out = append(out, storedSecret{id: id, column: "previous_secret", value: prev.String})
		}
	}
	return out, rows.Err()
}

// refusePlaintextBesideSealed refuses to store a secret as plaintext (no key is
// configured) in a database a key has been used with (settings.secrets_keyed,
// which every keyed Open sets and migration 0008 set wherever secrets were already
// sealed): the key exists, this process was just not given it (a CLI run outside
// the service, where systemd's credential is not visible), and the new secret
// would sit unprotected beside the sealed ones without anyone having chosen that.
func (w *wtx) refusePlaintextBesideSealed(what string) error {
	if w.w.s.box != nil {
		return nil
	}
	var keyed bool
	if err := w.queryRow(keyedQuery).Scan(&keyed); err != nil {
		return fmt.Errorf("store: %s: %w", what, err)
	}
	if keyed {
		return keyNeeded(fmt.Sprintf("store: %s: %s keeps its webhook secrets encrypted and no secret encryption key is "+
			"configured, so this one would be stored as plaintext; give the key (--secret-key-file, "+
			"SWITCHBOARD_SECRET_KEY_FILE or SWITCHBOARD_SECRET_ENCRYPTION_KEY)", what, w.w.s.path))
	}
	return nil
}

// keyedQuery reads settings.secrets_keyed.
const keyedQuery = `SELECT EXISTS (SELECT 1 FROM settings WHERE name = 'secrets_keyed')`

// markKeyed records that a secret encryption key is in use with this database
// (see refusePlaintextBesideSealed). Open calls it when it is given a key.
func (s *Store) markKeyed(ctx context.Context) error {
	if keyed, err := s.Keyed(ctx); err != nil || keyed {
		return err
	}
	return s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`INSERT OR IGNORE INTO settings (name, value) VALUES ('secrets_keyed', '1')`); err != nil {
			return fmt.Errorf("store: record that secrets are sealed: %w", err)
		}
		return nil
	})
}

// Keyed reports whether a secret encryption key has been used with this database.
func (s *Store) Keyed(ctx context.Context) (bool, error) {
	var keyed bool
	err := s.queryRow(ctx, keyedQuery).Scan(&keyed)
	if err != nil {
		return false, fmt.Errorf("store: read settings: %w", err)
	}
	return keyed, nil
}

// keyNeeded is an ErrSecretKey whose text says only what is missing (ErrSecretKey's
// own "do not match" would mislead when no key was given at all).
type keyNeeded string

func (e keyNeeded) Error() string        { return string(e) }
func (e keyNeeded) Is(target error) bool { return target == ErrSecretKey }

// CheckSecrets makes sure every sealed secret opens with the configured key, so a
// wrong key (or none, when secrets are sealed) stops serve at start instead of
// failing every delivery with 401 later. Open calls it whenever a key is set.
func (s *Store) CheckSecrets(ctx context.Context) error {
	secrets, err := s.storedSecrets(ctx)
	if err != nil {
		return err
	}
	var sealed, bad int
	var first int64
	for _, sec := range secrets {
		if !Sealed(sec.value) {
			continue
		}
		sealed++
		if _, err := s.box.Open(sec.value, secretAD(sec.id)); err != nil {
			if bad == 0 {
				first = sec.id
			}
			bad++
		}
	}
	switch {
	case bad > 0 && s.box == nil:
		return fmt.Errorf("store: %s holds %d encrypted webhook secrets and no secret encryption key is configured "+
			"(set SWITCHBOARD_SECRET_ENCRYPTION_KEY or --secret-key-file): %w", s.path, sealed, ErrSecretKey)
	case s.box == nil:
		// No secret is sealed yet, but a key has been used here: without it, every
		// webhook created from now on would be refused (or stored as plaintext).
		keyed, err := s.Keyed(ctx)
		if err != nil {
			return err
		}
		if keyed {
			return fmt.Errorf("store: %s was set up with a secret encryption key and none is configured "+
				"(set SWITCHBOARD_SECRET_ENCRYPTION_KEY or --secret-key-file): %w", s.path, ErrSecretKey)
		}
	case bad > 0:
		return fmt.Errorf("store: the configured secret encryption key does not open %d of the %d encrypted webhook "+
			"secrets in %s (first: webhook %d); is it the key they were encrypted with? (to rotate keys, give the old "+
			"one as the previous key until secrets reencrypt has run): %w", bad, sealed, s.path, first, ErrSecretKey)
	case s.box != nil:
		return s.checkSettingSecrets(ctx)
	}
	return nil
}

// ReencryptSecrets seals, with the configured key, every secret that is not sealed
// with it yet: plaintext ones, and ones sealed with a previous key during a key
// rotation. It runs in one transaction and returns how many it sealed.
func (s *Store) ReencryptSecrets(ctx context.Context, actor string) (int, error) {
	if s.box == nil {
		return 0, fmt.Errorf("store: re-encrypt secrets: no secret encryption key is configured: %w", ErrInvalid)
	}
	var n int
	err := s.write(ctx, func(w *wtx) error {
		n = 0
		read := secretsQuery
		if w.w.s.pg {
			// Writers run side by side there: a rotation another process commits
			// between this read and the UPDATEs below would be overwritten with
			// the old secret. The rows read stay locked until the commit.
			read = secretsQuery + ` FOR UPDATE`
		}
		rows, err := w.query(read)
		if err != nil {
			return fmt.Errorf("store: re-encrypt secrets: %w", err)
		}
		held, err := scanSecrets(rows)
		if err != nil {
			return fmt.Errorf("store: re-encrypt secrets: %w", err)
		}
		for _, sec := range held {
			if sec.value == "" {
				continue
			}
			plain, current, err := s.box.open(sec.value, secretAD(sec.id))
			if err != nil {
				return err // a key that opens nothing was refused at Open; this is a changed row
			}
			if current {
				continue
			}
			sealed, err := s.box.Seal(plain, secretAD(sec.id))
			if err != nil {
				return err
			}
			// The column name comes from the two constants above, never from input.
			if _, err := w.exec(`UPDATE webhooks SET `+sec.column+` = ? WHERE id = ?`, sealed, sec.id); err != nil {
				return fmt.Errorf("store: re-encrypt secret of webhook %d: %w", sec.id, err)
			}
			n++
		}
		sealed, err := w.sealSettingSecrets(s.box)
		if n += sealed; err != nil || n == 0 {
			return err
		}
		return w.audit(actor, "secrets.reencrypt", "", "", fmt.Sprintf("sealed=%d", n))
	})
	return n, err
}
