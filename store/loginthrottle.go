package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"
)

// The board counts wrong passwords per key (web/throttle.go). With several
// serves on one PostgreSQL database the counts live here, so that a guesser
// gains nothing by spreading guesses over the processes. The keys are stored as
// their SHA-256: they hold usernames and addresses, and bytes PostgreSQL text
// cannot hold.

// LoginThrottleForget is how long a key with no failure and no wait left is
// remembered; LoginThrottleRows bounds how many keys are (a guesser spraying
// usernames or addresses evicts the keys idle the longest).
const (
	LoginThrottleForget = time.Hour
	LoginThrottleRows   = 10000
)

// ThrottleEntry is one key's failed logins: how many, the last one, and until
// when the key must wait.
type ThrottleEntry struct {
	Failures int
	Last     time.Time
	Until    time.Time
}

// UpdateLoginThrottle runs fn on the entries of keys in one write transaction,
// their rows locked on PostgreSQL so that processes counting the same key at
// once each see the other's count. fn finds the keys that have an entry in the
// map; what it leaves there is written back, what it deleted is deleted. Rows
// with no failure for LoginThrottleForget and no wait left are deleted on the way.
func (s *Store) UpdateLoginThrottle(ctx context.Context, keys []string, fn func(map[string]*ThrottleEntry)) error {
	keys = slices.Sorted(slices.Values(keys)) // one lock order for every process
	keys = slices.Compact(keys)
	err := s.write(ctx, func(w *wtx) error {
		lock := ""
		if w.w.s.pg {
			lock = " FOR UPDATE"
		}
		m := map[string]*ThrottleEntry{}
		for _, k := range keys {
			// A row for every key first: a missing row could not be locked.
			if _, err := w.exec(`INSERT OR IGNORE INTO login_throttle (key, failures, last_at, until_at) VALUES (?, 0, 0, 0)`,
				throttleHash(k)); err != nil {
				return err
			}
			var failures int
			var last, until int64
			if err := w.queryRow(`SELECT failures, last_at, until_at FROM login_throttle WHERE key = ?`+lock,
				throttleHash(k)).Scan(&failures, &last, &until); err != nil {
				return err
			}
			if failures > 0 || until > 0 {
				m[k] = &ThrottleEntry{Failures: failures, Last: fromMS(last), Until: fromMS(until)}
			}
		}
		fn(m)
		for _, k := range keys {
			e, ok := m[k]
			var err error
			if ok {
				_, err = w.exec(`UPDATE login_throttle SET failures = ?, last_at = ?, until_at = ? WHERE key = ?`,
					e.Failures, ms(e.Last), ms(e.Until), throttleHash(k))
			} else {
				_, err = w.exec(`DELETE FROM login_throttle WHERE key = ?`, throttleHash(k))
			}
			if err != nil {
				return err
			}
		}
		_, err := w.exec(forgetThrottled, ms(w.now.Add(-LoginThrottleForget)), ms(w.now))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: count failed logins: %w", err)
	}
	return nil
}

// forgetThrottled deletes the keys with no failure since ? and no wait left at ?.
const forgetThrottled = `DELETE FROM login_throttle WHERE last_at < ? AND until_at < ?`

// PruneLoginThrottle deletes the forgotten keys and, past LoginThrottleRows,
// those idle the longest, whether they still wait or not, as the in-memory count
// does (web/throttle.go): between two passes the table grows by at most what
// the logins refused meanwhile wrote. It returns how many rows went.
func (s *Store) PruneLoginThrottle(ctx context.Context) (int64, error) {
	var n int64
	err := s.write(ctx, func(w *wtx) error {
		res, err := w.exec(forgetThrottled, ms(w.now.Add(-LoginThrottleForget)), ms(w.now))
		if err != nil {
			return err
		}
		n, _ = res.RowsAffected()
		// Older than the LoginThrottleRows-th newest (NULL, nothing, when fewer).
		res, err = w.exec(`DELETE FROM login_throttle WHERE last_at <
			(SELECT last_at FROM login_throttle ORDER BY last_at DESC LIMIT 1 OFFSET ?)`, LoginThrottleRows-1)
		if err != nil {
			return err
		}
		d, _ := res.RowsAffected()
		n += d
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("store: prune the login throttle: %w", err)
	}
	return n, nil
}

func throttleHash(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}
