package store

import (
	"context"
	"database/sql"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// A copy refused because its source is no Switchboard database (restore --from
// other.sqlite --db postgres://…, which the CLI sends to the copy) leaves no
// lock file beside someone else's file.
func TestCopyOfARefusedSourceLeavesNoLockFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "other.sqlite")
	db, err := sql.Open("sqlite", src)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE notes (x text)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if !IsSQLiteFile(src) {
		t.Fatal("not taken for a SQLite file")
	}
	_, err = CopyToPostgres(context.Background(), src, "postgres://127.0.0.1:1/none", "")
	if err == nil {
		t.Fatal("copied")
	}
	if _, serr := os.Stat(src + ".lock"); serr == nil {
		t.Errorf("the copy refused %s (%v) and left %s.lock behind", src, err, filepath.Base(src))
	}
}

// The copy of a database in another user's directory does not follow a
// symbolic link planted as its lock file: it would create the file the link
// names, as the user running the copy (root, say).
func TestCopyFollowsNoLinkPlantedAsItsLock(t *testing.T) {
	victim := filepath.Join(t.TempDir(), "nologin") // e.g. /etc/nologin for a root copy
	dir := t.TempDir()
	src := filepath.Join(dir, "sb.db")
	s, err := Open(context.Background(), src, quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.Symlink(victim, src+".lock"); err != nil {
		t.Fatal(err)
	}
	release, err := holdIfServed(src) // what CopyToPostgres(src, …) does first
	if err == nil {
		release()
	}
	if _, serr := os.Stat(victim); serr == nil {
		t.Errorf("holdIfServed(%s) created %s through the symlink %s.lock (err %v)", src, victim, filepath.Base(src), err)
	}
	if err == nil || !strings.Contains(err.Error(), "is a symbolic link") || !strings.Contains(err.Error(), "backup --to") {
		t.Errorf("holdIfServed of a source whose lock file is a link: %v, want it to say so and what to do", err)
	}
}

// dumpSchemas makes schemas (name -> tables) and a custom archive of them.
func dumpSchemas(t *testing.T, admin *pgx.Conn, base string, schemas map[string][]string) string {
	t.Helper()
	if _, err := exec.LookPath("pg_dump"); err != nil {
		testkit.SkipOrFail(t, "no pg_dump on PATH: the archive not made")
	}
	ctx := context.Background()
	var args []string
	for s, tabs := range schemas {
		admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+qi(s)+` CASCADE`)
		if _, err := admin.Exec(ctx, `CREATE SCHEMA `+qi(s)); err != nil {
			t.Fatal(err)
		}
		for _, tb := range tabs {
			if _, err := admin.Exec(ctx, `CREATE TABLE `+qi(s)+`.`+qi(tb)+` (id bigint)`); err != nil {
				t.Fatal(err)
			}
		}
		args = append(args, "--schema="+qi(s))
		t.Cleanup(func() { admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+qi(s)+` CASCADE`) })
	}
	archive := filepath.Join(t.TempDir(), "a.dump")
	out, err := exec.Command("pg_dump", append([]string{"--format=custom", "--file=" + archive, base}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_dump: %v %s", err, out)
	}
	for s := range schemas {
		admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+qi(s)+` CASCADE`)
	}
	return archive
}

// countingPgRestore puts on PATH a pg_restore that logs its calls, waits sleep
// seconds, and runs the real one; it returns the log.
func countingPgRestore(t *testing.T, sleep string) string {
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	real, _ := exec.LookPath("pg_restore")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\nsleep " + sleep + "\nexec " + real + " \"$@\"\n"
	os.WriteFile(filepath.Join(dir, "pg_restore"), []byte(script), 0o755)
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return log
}

// qi is s as an SQL identifier.
func qi(s string) string { return pgx.Identifier{s}.Sanitize() }

// archiveSchema tells the archive's one other schema from the --db's whatever
// spaces, capitals or the word DATA the names hold, and names none where it
// cannot tell.
func TestArchiveSchemaReadsOddNames(t *testing.T) {
	admin, base := superuserConn(t)
	cases := []struct {
		name    string
		schemas map[string][]string
		db      string
		want    string
	}{
		{"two spaces", map[string][]string{"zz  b": {"t"}}, "zz", "zz  b"},
		{"leading space", map[string][]string{" zzlead": {"t"}}, "zzlead", " zzlead"},
		{"trailing space", map[string][]string{"zztrail ": {"t"}}, "zztrail", "zztrail "},
		{"only spaces", map[string][]string{"   ": {"t"}}, "zzx", "   "},
		{"prefix pair", map[string][]string{"zzg": {"t"}, "zzg app": {"u"}}, "zzother", ""},
		{"prefix pair same shape", map[string][]string{"zzp": {"b c"}, "zzp b": {"c"}}, "zzother", ""},
		{"shorter archive", map[string][]string{"zzg": {"t"}}, "zzg app", "zzg"},
		{"table with spaces", map[string][]string{"zzg app": {"x y z"}}, "zzg", "zzg app"},
		{"own schema", map[string][]string{"zzown": {"t"}}, "zzown", ""},
		{"case", map[string][]string{"ZZcase": {"t"}}, "zzcase", "ZZcase"},
		{"DATA schema", map[string][]string{"DATA": {"t"}}, "zzg", "DATA"},
		{"DATA x schema", map[string][]string{"DATA x": {"t"}}, "zzg", "DATA x"},
		{"no tables", map[string][]string{"zzempty": nil}, "zzg", ""},
		{"db schema empty in archive", map[string][]string{"zzdb": nil, "zzo": {"t"}}, "zzdb", "zzo"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			archive := dumpSchemas(t, admin, base, c.schemas)
			// restore hands archiveSchema the listing pgRestoreRefusal read,
			// which it does not ask for again.
			listing := pgRestoreRefusal(archive).listing
			if listing == "" {
				t.Fatalf("pgRestoreRefusal kept no listing of %s", archive)
			}
			log := countingPgRestore(t, "0")
			if got := archiveSchema(archive, c.db, listing); got != c.want {
				t.Errorf("archive of %q, --db schema %q, from its listing: got %q, want %q", keys(c.schemas), c.db, got, c.want)
			}
			calls, _ := os.ReadFile(log)
			for _, call := range strings.Split(strings.TrimSpace(string(calls)), "\n") {
				if call != "" && !strings.Contains(call, "--schema=") {
					t.Errorf("archiveSchema, given the listing, ran pg_restore %s again", call)
				}
			}
			os.Remove(log)
			start := time.Now()
			got := archiveSchema(archive, c.db, "")
			calls, _ = os.ReadFile(log)
			n := strings.Count(string(calls), "\n")
			if got != c.want {
				t.Errorf("archive of %q, --db schema %q: got %q, want %q", keys(c.schemas), c.db, got, c.want)
			}
			t.Logf("%d pg_restore calls, %v", n, time.Since(start))
		})
	}
}

func keys(m map[string][]string) []string {
	var k []string
	for s := range m {
		k = append(k, s)
	}
	return k
}

// A pg_restore that answers --list at once but hangs when asked --schema (a
// slow or stuck read): archiveSchema gives up within its one bound, however
// many words the first line has.
func TestArchiveSchemaIsBoundedInTime(t *testing.T) {
	admin, base := superuserConn(t)
	archive := dumpSchemas(t, admin, base, map[string][]string{"zzg app": {"x y z"}})
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	real, _ := exec.LookPath("pg_restore")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\ncase \"$*\" in *--schema=*) exec sleep 30;; esac\nexec " + real + " \"$@\"\n"
	os.WriteFile(filepath.Join(dir, "pg_restore"), []byte(script), 0o755)
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	defer func(was time.Duration) { archiveTimeout = was }(archiveTimeout)
	archiveTimeout = time.Second
	start := time.Now()
	got := archiveSchema(archive, "zzg", "")
	took := time.Since(start)
	calls, _ := os.ReadFile(log)
	t.Logf("got %q after %v, %d calls:\n%s", got, took.Round(time.Second), strings.Count(string(calls), "\n"), calls)
	if took > 10*time.Second {
		t.Errorf("restore --from's advice took %v with a bound of %v on pg_restore", took.Round(time.Second), archiveTimeout)
	}
}
