package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// ErrInUse: a running serve holds the database (see LockForServe).
var ErrInUse = errors.New("database is in use by a running serve")

// LockForServe takes the advisory lock that marks path as served: an exclusive
// flock on path+".lock", held until unlock is called or the process exits (the
// kernel drops it even on SIGKILL, so a crash never leaves a stale lock). It
// fails with ErrInUse while another process holds it, which keeps a second
// serve and Restore away from a live database. CLI commands that only add or
// read rows do not take it: SQLite's own locking covers them.
//
// On PostgreSQL there is no file to lock and nothing to take: the server keeps
// its own locks, and restore is pg_restore's.
func LockForServe(path string) (unlock func(), err error) {
	if IsPostgres(path) {
		return func() {}, nil
	}
	if err := CheckDB(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	// The lock file stays: removing it would race a process about to lock it.
	return lockFile(f, path)
}

// lockFile takes the exclusive flock on f, path's lock file, or closes it: held
// until the returned func closes it.
func lockFile(f *os.File, path string) (unlock func(), err error) {
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("store: %s: %w", path, ErrInUse)
		}
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	return func() { f.Close() }, nil
}

// holdIfServed is LockForServe for a reader of path (the copy to PostgreSQL),
// which may read a backup in a directory it may not write, and follows no
// symbolic link planted as the lock file: it takes the lock on path's lock
// file, making it where it may; where it may not, on the file if it is there,
// and otherwise goes on without a lock. A serve that its directory's owner
// starts meanwhile is then not kept out: the copy is for a stopped serve.
func holdIfServed(path string) (release func(), err error) {
	if err := CheckDB(path); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path+".lock", os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if errors.Is(err, fs.ErrPermission) || errors.Is(err, unix.EROFS) {
		f, err = os.OpenFile(path+".lock", os.O_RDONLY|unix.O_NOFOLLOW, 0)
		if errors.Is(err, os.ErrNotExist) {
			return func() {}, nil
		}
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("store: %s.lock is a symbolic link, which the copy does not follow (it could make a "+
			"file where the link points): with serve stopped, copy a backup of %s instead (switchboard backup --to)", path, path)
	}
	if err != nil {
		return nil, fmt.Errorf("store: lock %s: %w", path, err)
	}
	return lockFile(f, path)
}

// Backup writes a consistent copy of the live database to dst, which must not
// exist yet. It runs VACUUM INTO on a connection of its own, so it reads one
// snapshot (every transaction committed before it began, none after) while
// serve keeps reading and committing: the writer is never paused. The copy is
// compact, self-contained (no -wal file), fsynced, and appears at dst only
// when complete.
func (s *Store) Backup(ctx context.Context, dst string) error {
	if s.pg {
		return s.pgDumpAdvice("backup", dst)
	}
	return vacuumInto(ctx, s.path, dst, false)
}

// Restore replaces the database at dst with the backup src, and returns where
// it kept the database it replaced ("" when there was none). It refuses while a
// serve holds dst (ErrInUse), and refuses a src that is not an intact
// Switchboard database (ErrNotSwitchboard, ErrSchemaTooNew, or a failed
// integrity check). dst is replaced atomically: a crash leaves the old
// database or the new one, never a mix; the old database's -wal and -shm go
// first, since a stale WAL would be replayed into the restored file. Nothing
// written since the backup is lost with it: the old database, its -wal
// included, is kept beside dst first (see keepReplaced), and a restore that
// cannot keep it changes nothing.
func Restore(ctx context.Context, src, dst string) (string, error) {
	if IsPostgres(dst) {
		return "", PgDumpAdvice("restore", dst, src)
	}
	if err := CheckDB(dst); err != nil {
		return "", err
	}
	// Held for the whole restore, so serve cannot start on a half-done file.
	unlock, err := LockForServe(dst)
	if err != nil {
		return "", err
	}
	defer unlock()
	if err := checkBackup(ctx, src); err != nil {
		return "", err
	}
	kept, err := keepReplaced(dst, time.Now())
	if err != nil {
		return "", err
	}
	var old os.FileInfo
	if kept != "" {
		if old, err = os.Stat(dst); err != nil {
			return "", fmt.Errorf("store: restore: %w", err)
		}
	}
	if err := vacuumInto(ctx, src, dst, true); err != nil {
		return "", unkeep(dst, old, kept, err)
	}
	return kept, nil
}

// unkeep undoes keepReplaced after a restore that failed (cause): unless dst was
// replaced after all, it is still the database it was, and gets back the -wal the
// restore may have removed (kept has it), and the names kept goes: a hard link
// left there would be no copy but a second name of the live database, with a
// -wal of its own that would be replayed into it. What it cannot undo stays, and
// the error names it.
func unkeep(dst string, old os.FileInfo, kept string, cause error) error {
	if kept == "" {
		return cause
	}
	stays := fmt.Errorf("%w (the database it was to replace, with its -wal, is kept as %s)", cause, kept)
	if now, err := os.Stat(dst); err != nil || !os.SameFile(old, now) {
		return stays
	}
	if _, err := os.Lstat(kept + "-wal"); err == nil {
		if err := keepFile(kept+"-wal", dst+"-wal"); err != nil && !errors.Is(err, os.ErrExist) {
			return stays
		}
		if err := os.Remove(kept + "-wal"); err != nil {
			return stays
		}
	}
	if err := os.Remove(kept); err != nil {
		return stays
	}
	syncFile(filepath.Dir(dst))
	return cause
}

// keepReplaced keeps the database at dst, which a restore is about to replace,
// as dst.before-restore-<date>-<time> with its -wal under that name too (SQLite
// finds a WAL by its database's name), so that the todos written since the
// backup can still be read: by hard links where the filesystem has them, else
// by copies. It returns the name, or "" when there is no database at dst.
func keepReplaced(dst string, now time.Time) (string, error) {
	if fi, err := os.Stat(dst); errors.Is(err, os.ErrNotExist) || (err == nil && fi.Size() == 0) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("store: restore: keep the database it replaces: %w", err)
	}
	base := dst + ".before-restore-" + now.Format("20060102-150405")
	for i := 1; ; i++ {
		kept := base
		if i > 1 {
			kept = fmt.Sprintf("%s-%d", base, i)
		}
		err := keepFile(dst, kept)
		if errors.Is(err, os.ErrExist) && i < 100 {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("store: restore: keep the database it replaces as %s (nothing was changed): %w", kept, err)
		}
		if err := keepFile(dst+"-wal", kept+"-wal"); err != nil && !errors.Is(err, os.ErrNotExist) {
			os.Remove(kept)
			return "", fmt.Errorf("store: restore: keep the database's -wal as %s-wal (nothing was changed): %w", kept, err)
		}
		if err := syncFile(filepath.Dir(dst)); err != nil {
			// Not left behind: as hard links they are the live database under a
			// second name, not a copy (see unkeep).
			os.Remove(kept + "-wal")
			os.Remove(kept)
			return "", fmt.Errorf("store: restore: keep the database it replaces (nothing was changed): %w", err)
		}
		return kept, nil
	}
}

// keepFile makes to a second name of from (a hard link), or a synced copy where
// links are not to be had. It never replaces to.
func keepFile(from, to string) error {
	err := os.Link(from, to)
	if err == nil || errors.Is(err, os.ErrExist) || errors.Is(err, os.ErrNotExist) {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(to)
	}
	return err
}

// checkBackup verifies that src is a readable, intact Switchboard database that
// this binary can open.
func checkBackup(ctx context.Context, src string) error {
	fi, err := os.Stat(src)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store: restore: no backup at %s: %w", src, os.ErrNotExist)
	}
	if err != nil {
		return fmt.Errorf("store: restore: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() == 0 {
		return fmt.Errorf("store: restore %s: %w (empty or not a regular file)", src, ErrNotSwitchboard)
	}
	// A copy with a journal beside it was being written when its writer died
	// (a killed backup's temp file) or is being written now. Opened read-only,
	// SQLite could only say "attempt to write a readonly database".
	if jfi, err := os.Stat(src + "-journal"); err == nil && jfi.Size() > 0 {
		return fmt.Errorf("store: restore %s: it has a rollback journal beside it (%s-journal): an unfinished copy, not a backup", src, filepath.Base(src))
	}
	db, err := openSnapshot(src)
	if err != nil {
		return err
	}
	defer db.Close()
	if err := checkVersion(ctx, db, src, false); err != nil {
		return err
	}
	var migrated int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master
		WHERE type = 'table' AND name = 'schema_migrations'`).Scan(&migrated); err != nil {
		return fmt.Errorf("store: restore: inspect %s: %w", src, err)
	}
	if migrated == 0 {
		return fmt.Errorf("store: restore %s: %w (no schema_migrations)", src, ErrNotSwitchboard)
	}
	rows, err := db.QueryContext(ctx, `PRAGMA integrity_check`)
	if err != nil {
		return fmt.Errorf("store: restore: integrity check of %s: %w", src, err)
	}
	defer rows.Close()
	var problems []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			return fmt.Errorf("store: restore: integrity check of %s: %w", src, err)
		}
		if line != "ok" {
			problems = append(problems, line)
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("store: restore: integrity check of %s: %w", src, err)
	}
	if len(problems) > 0 {
		return fmt.Errorf("store: restore: %s fails the integrity check: %s", src, strings.Join(problems[:min(len(problems), 5)], "; "))
	}
	return nil
}

// openSnapshot opens path read-only for one VACUUM INTO or inspection.
// VACUUM INTO needs only a read transaction, so in WAL mode it neither waits
// for nor blocks the writer.
func openSnapshot(path string) (*sql.DB, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

// vacuumInto copies the database at src into a new file in dst's directory and
// then moves it to dst: without replacing anything for a backup, replacing dst
// (and dropping its -wal and -shm) for a restore.
func vacuumInto(ctx context.Context, src, dst string, replace bool) error {
	op := "backup"
	if replace {
		op = "restore"
	}
	if !replace {
		if _, err := os.Lstat(dst); err == nil {
			return fmt.Errorf("store: backup: %s: %w", dst, os.ErrExist)
		}
	}
	// VACUUM INTO writes to a file that is absent or empty: an empty temp file
	// in the destination's directory, so the final rename stays on one
	// filesystem. Copies a killed run left there go first.
	sweepStaleTemps(dst)
	tmp, release, err := lockedTemp(dst)
	if err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	keep := false
	defer func() {
		if !keep {
			removeTemp(tmp)
		}
		release()
	}()

	db, err := openSnapshot(src)
	if err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, `VACUUM INTO ?`, tmp)
	db.Close()
	if err != nil {
		return fmt.Errorf("store: %s: copy %s to %s: %w", op, src, filepath.Dir(dst), err)
	}
	// VACUUM INTO does not sync its output; a backup that vanishes at the next
	// power cut is not one.
	if err := syncFile(tmp); err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}

	if replace {
		for _, suffix := range []string{"-wal", "-shm"} {
			if err := os.Remove(dst + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("store: restore: remove stale %s%s: %w", dst, suffix, err)
			}
		}
		if err := os.Rename(tmp, dst); err != nil {
			return fmt.Errorf("store: restore: %w", err)
		}
	} else if err := moveNoReplace(tmp, dst); err != nil {
		return fmt.Errorf("store: backup: %w", err)
	}
	keep = true
	if err := syncFile(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	return nil
}

// moveNoReplace moves tmp to dst unless dst exists. A hard link is the atomic
// no-clobber move; filesystems without links (FAT on a USB stick) get a check
// and a rename.
func moveNoReplace(tmp, dst string) error {
	err := os.Link(tmp, dst)
	if err == nil {
		return os.Remove(tmp)
	}
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%s: %w", dst, os.ErrExist)
	}
	if _, serr := os.Lstat(dst); serr == nil {
		return fmt.Errorf("%s: %w", dst, os.ErrExist)
	}
	return os.Rename(tmp, dst)
}

// A backup or restore builds its copy in a temp file beside dst, named
// tempPrefix+base(dst)+"-*", and holds an flock on it until done. A run killed
// half-way (a reboot, a cron timeout) cannot remove its copy, which may be as
// large as the database; the next run into the same directory does, whatever
// its own target's name (nightly backups are dated): a temp file nobody holds
// locked is such a leftover. The kernel drops a dead process's flock, and
// SQLite's own locks are fcntl locks, which an flock does not meet. Where
// flock is not available (some network filesystems), nothing is swept.

// tempPrefix begins the name of every temp copy, and of nothing else.
const tempPrefix = ".switchboard-tmp-"

// lockedTemp creates an empty temp file for dst and takes its flock. release
// drops the lock; it does not remove the file. The file is created under a name
// no sweep looks at and renamed once locked, so a sweep never meets it unlocked.
// Where flock is not supported the copy goes on unlocked (no sweep can lock it
// there either).
func lockedTemp(dst string) (path string, release func(), err error) {
	dir := filepath.Dir(dst)
	// 96 random bits: the rename must not land on another run's copy.
	b := make([]byte, 12)
	rand.Read(b)
	suffix := hex.EncodeToString(b)
	f, err := os.OpenFile(filepath.Join(dir, ".switchboard-new-"+suffix), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", nil, err
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	path = filepath.Join(dir, tempPrefix+filepath.Base(dst)+"-"+suffix)
	if err := os.Rename(f.Name(), path); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", nil, err
	}
	return path, func() { f.Close() }, nil
}

// sweepStaleTemps removes the temp copies in dst's directory, and their
// journals, that no running backup or restore holds. It is best effort: what
// it cannot remove stays.
func sweepStaleTemps(dst string) {
	dir := filepath.Dir(dst)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, tempPrefix) || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, name)
		if copyPath, ok := strings.CutSuffix(path, "-journal"); ok {
			// A journal outlives its copy only if a run died between the two removes.
			if _, err := os.Lstat(copyPath); errors.Is(err, os.ErrNotExist) {
				os.Remove(path)
			}
			continue
		}
		sweepIfUnheld(path)
	}
}

// sweepIfUnheld removes the temp copy at path unless a run holds its lock.
// The name was a regular file when listed; it is opened without following a
// link or waiting on a FIFO, and checked again through the descriptor.
func sweepIfUnheld(path string) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return
	}
	if unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil {
		removeTemp(path)
	}
}

// removeTemp removes a temp copy and the rollback journal VACUUM INTO keeps
// beside it while it writes.
func removeTemp(path string) {
	os.Remove(path)
	os.Remove(path + "-journal")
}

// syncFile fsyncs a file or directory.
func syncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return fmt.Errorf("sync %s: %w", path, err)
	}
	return nil
}
