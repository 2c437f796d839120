package store

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// walFile syncs the database's write-ahead log from outside SQLite.
//
// With synchronous=FULL, SQLite's COMMIT appends the transaction's frames to the WAL
// and syncs it before it returns, so the commit becomes visible and durable at once.
// The writer instead runs its connection at synchronous=NORMAL, whose commits are the
// same except for that one sync, and syncs the WAL itself through this file right
// after COMMIT: the bytes a commit appended are in the WAL's page cache, and
// fdatasync on any descriptor of the same file sends them to the disk. A write is
// answered only after that sync, so an acknowledged write is as durable as under
// FULL. What the split buys is the moment between the two: the commit is announced
// (the doorbell rings) while the disk works, instead of a disk-flush later.
//
// Everything else NORMAL does in WAL mode is what FULL does: the WAL is synced before
// a checkpoint copies it, the database after, and the WAL header when the log restarts.
type walFile struct {
	path    string // the -wal file next to the database, symlinks resolved as SQLite does
	f       *os.File
	rawFrom time.Time // when syncs may be raw again after a slow one (rawSync)
}

// openWAL opens the WAL that conn writes. It checks that conn is in WAL mode and
// makes it read the database first, so that SQLite has opened (and if need be
// created) its WAL before this opens the same file by name; from then on both
// descriptors stay on that one file, whatever later happens to the name.
func openWAL(ctx context.Context, conn *sql.Conn, dbPath string) (*walFile, error) {
	var mode string
	if err := conn.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil {
		return nil, fmt.Errorf("store: read the journal mode: %w", err)
	}
	if !strings.EqualFold(mode, "wal") {
		return nil, fmt.Errorf("store: %s is in journal mode %q, not WAL (is it on a file system without shared memory?)", dbPath, mode)
	}
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&n); err != nil {
		return nil, fmt.Errorf("store: read %s: %w", dbPath, err)
	}
	real, err := filepath.EvalSymlinks(dbPath)
	if err != nil {
		return nil, fmt.Errorf("store: locate the WAL of %s: %w", dbPath, err)
	}
	w := &walFile{path: real + "-wal"}
	if w.f, err = os.Open(w.path); err != nil {
		return nil, fmt.Errorf("store: open the WAL to sync it: %w", err)
	}
	return w, nil
}

// sync makes everything written to the WAL so far durable. Only the writer calls it.
func (w *walFile) sync() error {
	start := time.Now()
	raw := rawSync(runtime.GOMAXPROCS(0), start, w.rawFrom)
	err := fdatasync(w.f, raw)
	w.rawFrom = nextRawSync(raw, start, time.Since(start), w.rawFrom)
	if err != nil {
		return fmt.Errorf("store: sync %s: %w", w.path, err)
	}
	return nil
}

const (
	// rawSyncMax is the longest a raw sync may take without turning raw syncs off
	// for rawSyncPause.
	rawSyncMax   = 10 * time.Millisecond
	rawSyncPause = 10 * time.Second
)

// rawSync says whether a sync starting at now, with procs Ps, is made as a raw
// system call, which keeps the writer's P while the disk works; rawFrom is when
// raw syncs are allowed again after a slow one (see nextRawSync).
//
// Made the usual way, a sync of about a millisecond outlasts the 20 µs after which
// the runtime's monitor hands the P of a thread in a system call to another thread
// (when there is other work for it), and the writer then has to win a P back. As
// the writer syncs back to back under load, that kept the monitor waking every
// 20 µs and cost thread switches on every sync: in switchboard bench's drain, 12–14
// context switches a todo against 6.5–7.6 raw, and 2–18% more of the server's CPU a
// todo (5 interleaved pairs, every sync raw). The raw call has two costs, which
// bound where it is used:
//   - no other goroutine runs on the writer's P meanwhile, so with one P it would
//     stop the whole process for the sync: with one P, never raw;
//   - a stop-the-world (the collector's, twice a cycle) and the collector's scan of
//     the writer's stack wait for the sync in progress to end, stalling every
//     goroutine that long. A raw sync longer than rawSyncMax (this VM's longest,
//     over a drain of 2,473 syncs, took 6.3 ms) turns raw syncs off for
//     rawSyncPause, so a slow disk (an SD card) or a failing one pays at most one
//     slow raw sync per pause, and otherwise the usual call.
func rawSync(procs int, now, rawFrom time.Time) bool {
	return procs > 1 && !now.Before(rawFrom)
}

// nextRawSync is rawFrom after a sync (raw or not) that started at start and took
// took. Only raw syncs are judged: a usual one's time includes winning a P back.
func nextRawSync(raw bool, start time.Time, took time.Duration, rawFrom time.Time) time.Time {
	if raw && took > rawSyncMax {
		return start.Add(took + rawSyncPause)
	}
	return rawFrom
}

func (w *walFile) close() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}
