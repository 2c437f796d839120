package store

import (
	"fmt"
	"os"
	"path/filepath"
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
	path string   // the -wal file next to the database, symlinks resolved as SQLite does
	f    *os.File // opened at the first sync
	info os.FileInfo
}

func newWALFile(dbPath string) (*walFile, error) {
	real, err := filepath.EvalSymlinks(dbPath)
	if err != nil {
		return nil, fmt.Errorf("store: locate the WAL of %s: %w", dbPath, err)
	}
	return &walFile{path: real + "-wal"}, nil
}

// sync makes everything written to the WAL so far durable. The file is opened at
// the first sync, after the writer's first commit, when SQLite has it open too, and
// kept: SQLite keeps its own descriptor of the WAL for as long as its connection is
// open (it truncates or rewrites the file in place, and deletes it only when the last
// connection closes), so both descriptors name the same file for the store's life.
func (w *walFile) sync() error {
	if w.f == nil {
		f, err := os.Open(w.path)
		if err != nil {
			return fmt.Errorf("store: sync %s: %w", w.path, err)
		}
		info, err := f.Stat()
		if err != nil {
			f.Close()
			return fmt.Errorf("store: sync %s: %w", w.path, err)
		}
		w.f, w.info = f, info
	}
	if err := fdatasync(w.f); err != nil {
		return fmt.Errorf("store: sync %s: %w", w.path, err)
	}
	return nil
}

func (w *walFile) close() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}
