package store

import (
	"errors"
	"fmt"
	"strings"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Domain outcomes. The edges map these to MCP error codes and HTTP statuses, each in
// one place.
var (
	ErrNotFound      = errors.New("not found")
	ErrConflict      = errors.New("conflict")
	ErrAlreadyExists = errors.New("already exists")
	ErrInvalid       = errors.New("invalid argument")
	ErrClosed        = errors.New("store is closed")
	// ErrNoLeaseSeq: an acknowledgement that names no lease (Ack.LeaseSeq 0). It
	// is a conflict too: only the lease's token may act on a claimed todo.
	ErrNoLeaseSeq = fmt.Errorf("no lease_seq given: pass lease_seq from your claim: %w", ErrConflict)
	// ErrStale: what the caller acted on changed before its write (a webhook's
	// secrets were rotated between verifying a delivery and recording it).
	ErrStale = errors.New("changed since it was read")
	// ErrNotSwitchboard: the file is not a database, or a database of something else.
	ErrNotSwitchboard = errors.New("not a Switchboard database")
	// ErrSchemaTooNew: the database was migrated by a newer Switchboard.
	ErrSchemaTooNew = errors.New("database schema is newer than this binary")
)

// isUnique reports whether err is a UNIQUE or PRIMARY KEY constraint violation.
func isUnique(err error) bool {
	if pgErrorCode(err) == "23505" {
		return true
	}
	var se *sqlite.Error
	if errors.As(err, &se) {
		c := se.Code()
		return c == sqlite3.SQLITE_CONSTRAINT_UNIQUE || c == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
	}
	return false
}

// isNotADB reports whether err says the file is not a SQLite database.
func isNotADB(err error) bool {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()&0xff == sqlite3.SQLITE_NOTADB
	}
	return false
}

// Reason is err as a person reads it: without the store's package prefix (which
// package failed is the store's business) and without the text of whichever of
// sentinels err wraps at its end, which the caller's code or status already
// says ("…: conflict" under code conflict). Errors are wrapped once, where they
// are made, so nothing else in the text is said twice.
func Reason(err error, sentinels ...error) string {
	msg := strings.TrimPrefix(err.Error(), "store: ")
	for _, s := range sentinels {
		if errors.Is(err, s) {
			msg = strings.TrimSuffix(msg, ": "+s.Error())
		}
	}
	return msg
}
