package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// addTodos adds n todos to queue and returns their ids.
func addTodos(t *testing.T, s *Store, queue string, n int) []int64 {
	t.Helper()
	ids := make([]int64, 0, n)
	for i := range n {
		td, err := s.AddTodo(context.Background(), NewTodo{Queue: queue, Payload: fmt.Sprintf("%s-%d", queue, i)})
		if err != nil {
			t.Fatalf("add todo: %v", err)
		}
		ids = append(ids, td.ID)
	}
	return ids
}

// addKeyedTodos adds n todos of key to queue, in order, and returns their ids.
func addKeyedTodos(t *testing.T, s *Store, queue, key string, n int) []int64 {
	t.Helper()
	ids := make([]int64, 0, n)
	for i := range n {
		td, err := s.AddTodo(context.Background(), NewTodo{Queue: queue, Payload: fmt.Sprintf("%s-%d", key, i),
			Options: TodoOptions{Key: key}})
		if err != nil {
			t.Fatalf("add todo: %v", err)
		}
		ids = append(ids, td.ID)
	}
	return ids
}

// integrityOK runs PRAGMA integrity_check on an open store.
func integrityOK(t *testing.T, s *Store) {
	t.Helper()
	var res string
	if err := s.rdb.QueryRow(`PRAGMA integrity_check`).Scan(&res); err != nil {
		t.Fatalf("integrity_check: %v", err)
	}
	if res != "ok" {
		t.Fatalf("integrity_check = %q", res)
	}
}

// missing returns the ids that s does not have.
func missing(t *testing.T, s *Store, ids []int64) []int64 {
	t.Helper()
	var gone []int64
	for _, id := range ids {
		if _, err := s.Todo(context.Background(), id); errors.Is(err, ErrNotFound) {
			gone = append(gone, id)
		} else if err != nil {
			t.Fatalf("todo %d: %v", id, err)
		}
	}
	return gone
}

func TestBackupUnderConcurrentWrites(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	ctx := context.Background()
	s := openTest(t, Options{})

	// Writers commit todos until the backup is done; every id whose AddTodo
	// returned before Backup was called must be in the copy.
	const writers = 4
	var (
		mu        sync.Mutex
		committed []int64
		wg        sync.WaitGroup
	)
	stop := make(chan struct{})
	warm := make(chan struct{})
	var warmOnce sync.Once
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				td, err := s.AddTodo(ctx, NewTodo{Queue: "builds", Payload: fmt.Sprintf("w%d-%d", w, i)})
				if err != nil {
					t.Errorf("add todo: %v", err)
					return
				}
				mu.Lock()
				committed = append(committed, td.ID)
				if len(committed) == 200 {
					warmOnce.Do(func() { close(warm) })
				}
				mu.Unlock()
			}
		}()
	}
	<-warm
	mu.Lock()
	before := append([]int64(nil), committed...)
	mu.Unlock()

	dst := filepath.Join(t.TempDir(), "backup.db")
	err := s.Backup(ctx, dst)
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("backup: %v", err)
	}
	mu.Lock()
	t.Logf("%d todos committed before the backup, %d by the end", len(before), len(committed))
	mu.Unlock()

	b, err := Open(ctx, dst, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("open backup: %v", err)
	}
	defer b.Close()
	integrityOK(t, b)
	if gone := missing(t, b, before); len(gone) > 0 {
		t.Fatalf("backup lacks %d todos committed before it started, e.g. %v", len(gone), gone[:min(len(gone), 5)])
	}
	if _, err := os.Stat(dst + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backup has a -wal file (err %v); it should be self-contained", err)
	}
}

func TestBackupRefusesExistingFile(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	s := openTest(t, Options{})
	addTodos(t, s, "inbox", 3)
	dir := t.TempDir()
	dst := filepath.Join(dir, "backup.db")
	if err := os.WriteFile(dst, []byte("an older backup"), 0o600); err != nil {
		t.Fatal(err)
	}

	err := s.Backup(context.Background(), dst)
	if !errors.Is(err, os.ErrExist) {
		t.Fatalf("backup over an existing file = %v, want os.ErrExist", err)
	}
	if got, _ := os.ReadFile(dst); string(got) != "an older backup" {
		t.Errorf("existing file changed to %q", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("backup left files behind: %v", entries)
	}
}

// A backup killed half-way leaves its temp copy (as large as the database)
// and the copy's journal beside the destination; the next backup into that
// directory removes them, whatever its own target is called (nightly backups
// are dated), but not a copy another run still holds, nor other files.
func TestBackupSweepsLeftovers(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	s := openTest(t, Options{})
	addTodos(t, s, "inbox", 3)
	dir := t.TempDir()
	write := func(name string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("half a copy"), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	left := write(tempPrefix + "backup-2026-11-29.db-111")
	leftJournal := write(tempPrefix + "backup-2026-11-29.db-111-journal")
	orphanJournal := write(tempPrefix + "backup-2026-11-28.db-222-journal")
	other := write(".backup-2026-11-27.db.tmp-333") // not ours
	held := write(tempPrefix + "backup-2026-11-30.db-444")
	f, err := os.Open(held)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, tempPrefix+"fifo"), 0o600); err != nil {
		t.Fatal(err)
	}

	if err := s.Backup(context.Background(), filepath.Join(dir, "backup-2026-11-30.db")); err != nil {
		t.Fatalf("backup: %v", err)
	}
	for _, gone := range []string{left, leftJournal, orphanJournal} {
		if _, err := os.Lstat(gone); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("leftover %s: %v, want it removed", filepath.Base(gone), err)
		}
	}
	for _, kept := range []string{other, held} {
		if _, err := os.Lstat(kept); err != nil {
			t.Errorf("%s was removed: %v", filepath.Base(kept), err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Errorf("files after the backup: %v, want the backup, the fifo and the two kept", entries)
	}
}

// While a run holds its temp copy, a sweep leaves it; once released, it is a
// leftover.
func TestLockedTempSurvivesSweepUntilReleased(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	dst := filepath.Join(t.TempDir(), "nightly.db")
	tmp, release, err := lockedTemp(dst)
	if err != nil {
		t.Fatal(err)
	}
	sweepStaleTemps(filepath.Join(filepath.Dir(dst), "another.db"))
	if _, err := os.Lstat(tmp); err != nil {
		t.Fatalf("a held temp copy was swept: %v", err)
	}
	release()
	sweepStaleTemps(dst)
	if _, err := os.Lstat(tmp); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a released temp copy was not swept: %v", err)
	}
}

// Runs sweeping the same directory at once each get a temp copy of their own
// and never lose it to another's sweep.
func TestLockedTempUnderConcurrentSweeps(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	dst := filepath.Join(t.TempDir(), "nightly.db")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				sweepStaleTemps(dst)
				tmp, release, err := lockedTemp(dst)
				if err != nil {
					t.Error(err)
					return
				}
				if _, err := os.Lstat(tmp); err != nil {
					t.Errorf("a held copy vanished: %v", err)
				}
				release()
			}
		}()
	}
	wg.Wait()
}

func TestRestore(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "sb.db")
	s, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	backedUp := addTodos(t, s, "inbox", 20)
	backup := filepath.Join(dir, "backup.db")
	if err := s.Backup(ctx, backup); err != nil {
		t.Fatalf("backup: %v", err)
	}
	lost := addTodos(t, s, "after", 5)
	s.Close()
	// A WAL left by the old database must not be replayed into the restored one.
	if err := os.WriteFile(path+"-wal", bytes.Repeat([]byte{0x37}, 4096), 0o600); err != nil {
		t.Fatal(err)
	}

	kept, err := Restore(ctx, backup, path)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if _, err := os.Stat(path + "-wal"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("stale -wal survived the restore (err %v)", err)
	}
	// The database it replaced is kept, with what was written after the backup
	// and its -wal beside it under its new name.
	if !strings.HasPrefix(kept, path+".before-restore-") {
		t.Fatalf("kept the replaced database as %q", kept)
	}
	if b, err := os.ReadFile(kept + "-wal"); err != nil || len(b) != 4096 {
		t.Errorf("the replaced database's -wal was not kept beside it: %d bytes, %v", len(b), err)
	}
	old, err := Open(ctx, kept, Options{})
	if err != nil {
		t.Fatalf("open the kept database: %v", err)
	}
	if gone := missing(t, old, append(backedUp, lost...)); len(gone) > 0 {
		t.Errorf("the kept database lacks todos %v", gone)
	}
	old.Close()
	r, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("open restored database: %v", err)
	}
	defer r.Close()
	integrityOK(t, r)
	if gone := missing(t, r, backedUp); len(gone) > 0 {
		t.Errorf("restored database lacks backed-up todos %v", gone)
	}
	if gone := missing(t, r, lost); len(gone) != len(lost) {
		t.Errorf("restored database has todos added after the backup: %d of %d", len(lost)-len(gone), len(lost))
	}
	// The restored database takes writes again.
	addTodos(t, r, "inbox", 1)
}

// A restore that fails after it kept the database it was to replace leaves that
// database as it was, -wal and all, and no second name of it: a hard link left
// behind is not a copy but the live database under another name, whose stale
// -wal would be replayed into it when someone opens it.
func TestRestoreThatFailsLeavesTheDatabaseAsItWas(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "source.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	backedUp := addTodos(t, s, "inbox", 20)
	backup := filepath.Join(dir, "backup.db")
	if err := s.Backup(ctx, backup); err != nil {
		t.Fatal(err)
	}
	since := addTodos(t, s, "after", 5)
	// The live database as a running serve leaves it: the todos added since the
	// backup are in its -wal, not yet checkpointed.
	live := filepath.Join(dir, "live.db")
	for _, suffix := range []string{"", "-wal"} {
		b, err := os.ReadFile(s.path + suffix)
		if err != nil || (suffix == "-wal" && len(b) == 0) {
			t.Fatalf("read %s%s: %d bytes, %v", s.path, suffix, len(b), err)
		}
		if err := os.WriteFile(live+suffix, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	// A -shm the restore cannot remove fails it after it removed the -wal.
	if err := os.MkdirAll(filepath.Join(live+"-shm", "x"), 0o700); err != nil {
		t.Fatal(err)
	}

	if kept, err := Restore(ctx, backup, live); err == nil {
		t.Fatalf("restore succeeded (kept %q)", kept)
	}
	if left, _ := filepath.Glob(live + ".before-restore-*"); len(left) > 0 {
		t.Errorf("a failed restore left %v beside the database it did not replace", left)
	}
	if err := os.RemoveAll(live + "-shm"); err != nil {
		t.Fatal(err)
	}
	r, err := Open(ctx, live, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	integrityOK(t, r)
	if gone := missing(t, r, append(backedUp, since...)); len(gone) > 0 {
		t.Errorf("after a failed restore the database lacks todos %v", gone)
	}
}

func TestRestoreRefuses(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "source.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	addTodos(t, s, "inbox", 50)
	good := filepath.Join(dir, "good.db")
	if err := s.Backup(ctx, good); err != nil {
		t.Fatal(err)
	}
	s.Close()

	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	foreign := filepath.Join(dir, "foreign.db")
	f, err := sql.Open("sqlite", foreign)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Exec(`CREATE TABLE recipes (name TEXT)`); err != nil {
		t.Fatal(err)
	}
	f.Close()
	goodBytes, _ := os.ReadFile(good)
	corrupt := bytes.Clone(goodBytes)
	// Scribble over every page after the first two: the header still says
	// SQLite, the b-trees do not add up.
	for i := 2 * 4096; i < len(corrupt); i++ {
		corrupt[i] ^= 0x5a
	}

	tests := []struct {
		name    string
		src     string
		serving bool
		want    error  // nil: any error
		says    string // in the error, when set
	}{
		{name: "serve holds the database", src: good, serving: true, want: ErrInUse},
		{name: "not SQLite at all", src: write("notes.txt", []byte(strings.Repeat("not a database\n", 100))), want: ErrNotSwitchboard},
		{name: "empty file", src: write("empty.db", nil), want: ErrNotSwitchboard},
		{name: "another program's database", src: foreign, want: ErrNotSwitchboard},
		{name: "corrupt", src: write("corrupt.db", corrupt)},
		{name: "missing", src: filepath.Join(dir, "nope.db"), want: os.ErrNotExist},
		// A killed backup's temp copy: whole pages, and the journal of the
		// write that never finished.
		{name: "an unfinished copy", src: write("unfinished.db", goodBytes), says: "unfinished copy"},
	}
	write("unfinished.db-journal", goodBytes[:4096])
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), "live.db")
			if err := os.WriteFile(dst, []byte("the live database"), 0o600); err != nil {
				t.Fatal(err)
			}
			if tt.serving {
				unlock, err := LockForServe(dst)
				if err != nil {
					t.Fatal(err)
				}
				defer unlock()
			}
			_, err := Restore(ctx, tt.src, dst)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Fatalf("restore = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("restore = %v, want it to say %q", err, tt.says)
			}
			t.Logf("refused: %v", err)
			if got, _ := os.ReadFile(dst); string(got) != "the live database" {
				t.Errorf("refused restore changed the live database")
			}
		})
	}
}

func TestLockForServe(t *testing.T) {
	testkit.SQLiteOnly(t, "a file, its WAL and its fsyncs")
	path := filepath.Join(t.TempDir(), "sb.db")
	unlock, err := LockForServe(path)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	if _, err := LockForServe(path); !errors.Is(err, ErrInUse) {
		t.Fatalf("second lock = %v, want ErrInUse", err)
	}
	unlock()
	unlock2, err := LockForServe(path)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	unlock2()
}
