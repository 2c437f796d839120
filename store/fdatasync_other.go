//go:build !linux

package store

import "os"

// fdatasync falls back to fsync where there is no fdatasync, as SQLite does.
func fdatasync(f *os.File) error { return f.Sync() }
