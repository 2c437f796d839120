package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// WriteTrouble says that writes are failing for a reason outside them: the disk is
// full, an I/O error, the file turned read-only. Every write fails the same way
// until someone acts, so /readyz, systemd's status line and the board say so.
type WriteTrouble struct {
	Since  time.Time // the first refused write of this spell
	Last   time.Time // the latest refused write
	Failed int64     // writes refused since
	Err    string    // the latest refusal's cause
}

// troubleLinger is how long a spell of failing writes outlasts its latest refusal
// once writes commit again: on a full disk a small write can still fit (in a WAL
// that is reused) while the next delivery does not, and the spell must not flicker.
const troubleLinger = 10 * time.Second

func (t *WriteTrouble) String() string {
	return fmt.Sprintf("writes failing since %s (%d refused): %s", t.Since.Format(time.DateTime), t.Failed, t.Err)
}

// WriteTrouble is the current spell of failing writes, nil while writes succeed:
// it ends once a write has committed and none was refused for troubleLinger. A
// restart does not end one (a full disk stays full), so it is not a reason for the
// watchdog to restart serve: Ping does not report it.
func (s *Store) WriteTrouble() *WriteTrouble {
	if s.writer == nil {
		return nil
	}
	if s.writer.trouble.Load() == nil || s.writer.endTrouble(s.now()) {
		return nil
	}
	if t := s.writer.trouble.Load(); t != nil {
		c := *t
		return &c
	}
	return nil
}

// SetMaxPages caps the database at n pages, so that a write past it fails as on a
// full disk; a cap below the current size holds it there. It stands in for a full
// disk in tests: a real one needs a filesystem of its own.
func (s *Store) SetMaxPages(ctx context.Context, n int64) error {
	if s.pg {
		return fmt.Errorf("store: a page cap: %w", ErrSQLiteOnly)
	}
	return s.exclusive(ctx, func(c *sql.Conn) error {
		_, err := c.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", n))
		return err
	})
}

// diskTrouble reports whether err is the disk or the file failing rather than the
// write's own business (a conflict, a missing row). On PostgreSQL: the server
// out of disk, memory or connections (class 53), its I/O failing (58), data
// corrupted (XX001, XX002), or the database read-only (25006: a replica, or
// default_transaction_read_only), which every write meets until someone acts.
func diskTrouble(err error) bool {
	switch code := pgErrorCode(err); {
	case strings.HasPrefix(code, "53"), strings.HasPrefix(code, "58"),
		code == "XX001", code == "XX002", code == pgReadOnly:
		return true
	case code != "":
		return false
	}
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff {
	case sqlite3.SQLITE_FULL, sqlite3.SQLITE_IOERR, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN,
		sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
		return true
	}
	return false
}

// noteRefusals counts the batch's writes that failed for disk trouble, and logs
// the start of a spell once (each refused caller logs or answers its own).
func (w *writer) noteRefusals(batch []*writeReq) {
	var cause error
	n := int64(0)
	for _, r := range batch {
		if r.err != nil && diskTrouble(r.err) {
			cause = r.err
			n++
		}
	}
	if n == 0 {
		return
	}
	w.troubleMu.Lock()
	defer w.troubleMu.Unlock()
	now := w.s.now()
	next := WriteTrouble{Since: now, Last: now, Failed: n, Err: cause.Error()}
	if cur := w.trouble.Load(); cur != nil {
		next.Since, next.Failed = cur.Since, cur.Failed+n
	} else {
		w.s.log.Error("store: writes are failing; they will until the cause is mended", "err", cause)
	}
	w.trouble.Store(&next)
}

// noteCommitted notes that a transaction committed, and ends a spell of failing
// writes whose latest refusal is troubleLinger old.
func (w *writer) noteCommitted() {
	t := w.trouble.Load()
	if t == nil {
		return
	}
	now := w.s.now()
	w.lastCommit.Store(now.UnixNano())
	if now.Sub(t.Last) >= troubleLinger {
		w.endTrouble(now)
	}
}

// endTrouble ends the spell of failing writes if it is over at now: a transaction
// committed after its latest refusal, which is troubleLinger old. It reports
// whether there is no spell any more.
func (w *writer) endTrouble(now time.Time) bool {
	w.troubleMu.Lock()
	defer w.troubleMu.Unlock()
	cur := w.trouble.Load()
	if cur == nil {
		return true
	}
	if w.lastCommit.Load() <= cur.Last.UnixNano() || now.Sub(cur.Last) < troubleLinger {
		return false
	}
	w.trouble.Store(nil)
	w.s.log.Info("store: writes succeed again", "failing_since", cur.Since, "refused", cur.Failed, "last_err", cur.Err)
	return true
}
