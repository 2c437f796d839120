package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

func TestIsPostgres(t *testing.T) {
	for db, want := range map[string]bool{
		"postgres://u@h/db": true, "postgresql://h/db": true, "POSTGRES://u@h/db": true,
		"host=db port=5432 dbname=sb": true, " dbname=sb": true, "user=sb password=x": true,
		"./switchboard.db": false, "/var/lib/switchboard/switchboard.db": false, "postgres.db": false,
		"host.db": false, "./host=db": false, "hostname=x.db": false,
		"a=1 b=2.db": false, "Host=laptop.db": false, "\u00a0host=db": true,
		"client_encoding=UTF8 host=db password=x": true, "sslcrl=/x host=db": true, "keepalives=1 host=db": true,
	} {
		if IsPostgres(db) != want {
			t.Errorf("IsPostgres(%q) = %v", db, !want)
		}
	}
}

// A --db value that would be misread (a file named after a URL, a password's
// tail taken for the host) is refused, without repeating the password.
func TestCheckDBRefusesWhatItWouldMisread(t *testing.T) {
	for _, db := range []string{
		"POSTGRES://sb:hunter2@db/sb",
		"Postgresql://sb:hunter2@db/sb",
		"postgres://sb:abc@hunter2@db:5432/sb",
		"postgres://sb:hun/ter2@db/sb",         // libpq: host sb, port hun
		"postgres://user:12/ss?x=y@host/db",    // libpq: host user, port 12, database ss
		"postgres://a/b?c=d:hunter2@db/sb",     // libpq: host a, database b
		"postgres://sb:a@hunter2/x@db:5432/sb", // libpq: host hunter2, database x@db…
		"mysql://sb:hunter2@db/sb",
		"Host=h password=hunter2", // pgx's settings, though not libpq's: no file named after them
		"sqlite://sb:hunter2@db/sb",
		"postgres://db.example?sslmode=require&password=hunter2@2024", // libpq and pgx: user db.example?…=hunter2
		"postgres://sb:hun#ter2@db/sb",
		"HOST=127.0.0.1 port=5432 dbname=sb user=sb", // libpq's keywords in the wrong case, not a file's name
		" Dbname=sb",
		"postgresql:sb:hunter2@db",  // no //: a new SQLite file of that name in the working directory
		"postgres:sb:hunter2@db/sb", // the same, or an error about its lock file
		"PostgreSQL:sb:hunter2@db",
	} {
		err := CheckDB(db)
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("CheckDB(%q) = %v, want ErrInvalid", db, err)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("CheckDB(%q) shows the password: %v", db, err)
		}
		if _, err := Open(context.Background(), db, Options{}); !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%q) = %v, want ErrInvalid without the password", db, err)
		}
	}
	for _, db := range []string{
		"postgres://sb:hunter%40two@db/sb", "postgresql://db/sb?password=a@b", "host=db password=a@b@c",
		"postgres://db.example:5432/sb?user=alice@myserver", "postgres://db:5432/sb?application_name=a@b",
		"./switchboard.db", "/var/lib/switchboard/switchboard.db", "dir/with:colon.db", "my password.db", "a=1 b=2.db",
	} {
		if err := CheckDB(db); err != nil {
			t.Errorf("CheckDB(%q) = %v", db, err)
		}
	}
	cwd, _ := os.Getwd()
	if entries, _ := os.ReadDir(cwd); len(entries) > 0 {
		for _, e := range entries {
			if strings.Contains(e.Name(), "hunter2") {
				t.Errorf("a refused --db made %s", e.Name())
			}
		}
	}
}

// Redacted names the server as pgx reads the value, never the value itself.
func TestRedacted(t *testing.T) {
	t.Setenv("PGUSER", "pg")
	t.Setenv("PGPORT", "")
	t.Setenv("PGHOST", "")
	for in, want := range map[string]string{
		"postgres://sb:hunter2@db:5432/sb":                        "postgres://sb@db:5432/sb",
		"postgres://sb@db/sb?password=hunter2":                    "postgres://sb@db:5432/sb",
		"postgresql://db:6543/sb?sslmode=disable":                 "postgres://pg@db:6543/sb",
		"postgres://sb:hunter2@db":                                "postgres://sb@db:5432/",
		"postgres://sb@db/sb?sslmode=disable&sslpassword=hunter2": "postgres://sb@db:5432/sb",
		"postgres://sb@h1:5433,h2/sb?search_path=switchboard":     "postgres://sb@h1:5433,h2:5432/sb?search_path=switchboard",
		"host=db password=hunter2 dbname=sb":                      "postgres://pg@db:5432/sb",
		`host=db password='hun ter\'2' dbname=sb`:                 "postgres://pg@db:5432/sb",
		"host=/run/postgresql dbname=sb":                          "postgres://pg@%2Frun%2Fpostgresql:5432/sb",
		"host=/tmp,db.example port=5432,6543 dbname=sb":           "postgres://pg@%2Ftmp:5432,db.example:6543/sb",
		"postgres://sb:abc@hunter2@db:5432/sb":                    "the --db value",
		"postgres://sb@db/sb?password=%zz":                        "the PostgreSQL --db value",
		"./switchboard.db":                                        "./switchboard.db",
	} {
		if got := Redacted(in); got != want {
			t.Errorf("Redacted(%q) = %q, want %q", in, got, want)
		}
	}
}

// No way of writing a password into --db shows it, in a message, a log line or
// a command to paste, nor in what pgx says of a value it cannot read.
func TestNoPasswordShows(t *testing.T) {
	for _, db := range []string{
		"postgres://sb@db?password=hunter2",
		"postgres://db:5432?sslmode=require&sslpassword=hunter2",
		"postgres://sb:hun/ter2@db/sb",
		"postgres://sb:hun?ter2@db/sb",
		"postgres://sb:a@hun/ter2@db/sb",
		"postgres://sb@db/sb?sslmode=require&password=hunter2&application_name=x",
		`host=db dbname=sb password=hun\ ter2`,
		`host=db password='hun ter2' dbname=sb`,
		"postgres://sb:hunter2@db:99999/sb",
		"client_encoding=UTF8 host=db password=hunter2",
		"postgres://sb@db/sb?pass%77ord=hunter2&search_path=x",
		"postgres://sb@db/sb?%73slpassword=hunter2",
		"postgres://u:pa/x?hunter2@db:5432/sb",
		"host=h password\v=hunter2",
		"host=h password=abc\\\nhunter2",
		"host=h password='abc\\\nhunter2'",
		"options=password=' password='hunter2'",
		"host=h password=hunter2\\",
		" postgres://u:hunter2@db/sb",
		"postgres://user:12/ss?x=hunter2@host/db",
		"postgres://user:/hunter2?x=y@host/db",
		`host=h password='a\' b` + "`" + `: hunter2' port=bad`,
		`host=h application_name='` + "`" + `: ' password=se\ hunter2 port=bad`,
		"Host=h password=hunter2",
		"pool_max_conns=5 host=h password=hunter2",
		"\vhost=h password=hunter2",
		"application_name=password=' password=ab'hunter2",
		"host=db application_name=password=' password=ab'hunter2 dbname=sb",
		"application_name='password=' password=x'hunter2'",
		"postgres://a/b?c=d:hunter2@db/sb",
		"postgres://db/sb?password=pa&target_session_attrs=hunt%65r2",
		`host=db password=pw target_session_attrs=h\u\n\t\e\r\2`,
		"\u00a0host=db password=hunter2",
	} {
		paste, _ := Pasteable(db)
		_, perr := parsePostgres(db)
		for what, shown := range map[string]string{"Redacted": Redacted(db), "Pasteable": paste,
			"parse": fmt.Sprint(perr), "advice": PgDumpAdvice("backup", db, "").Error()} {
			if strings.Contains(shown, "ter2") {
				t.Errorf("%s(%q) shows the password: %s", what, db, shown)
			}
		}
	}
}

// What Switchboard prints for the user to paste holds no password, masked or
// not, and survives a shell.
func TestPasteable(t *testing.T) {
	for _, c := range []struct {
		in, want string
		without  bool
	}{
		{"postgres://sb:hunter2@db:5432/sb", "postgres://sb@db:5432/sb", true},
		// A password that is also the user's name keeps the other settings.
		{"postgres://alice:alice@h1:1,h2:2/db?target_session_attrs=read-write&sslmode=require",
			"'postgres://alice@h1:1,h2:2/db?target_session_attrs=read-write&sslmode=require'", true},
		{"postgres://sb@db/sb?sslmode=require&password=hunter2", "'postgres://sb@db/sb?sslmode=require'", true},
		{"postgres://sb@db/sb?sslmode=require&application_name=x", "'postgres://sb@db/sb?sslmode=require&application_name=x'", false},
		{"host=db password=hunter2 dbname=sb", "'host=db dbname=sb'", true},
		{"postgres://sb@db/sb?sslpassword=hunter2", "postgres://sb@db/sb", true},
		{"postgres://sb@db?password=hunter2", "postgres://sb@db", true},
		{"postgres://sb@db/sb?a=1&password=hunter2&b=2", "'postgres://sb@db/sb?a=1&b=2'", true},
		{`host=db password=hun\ ter2 dbname=sb`, "'host=db dbname=sb'", true},
		{`host=db application_name='a b' password='pw-9z' options='-c x=\'y\''`, `'host=db application_name='\''a b'\'' options='\''-c x=\'\''y\'\'''\'''`, true},
		// An @ in the query is not the end of a password.
		{"postgres://sb:hunter2@db:5432/sb?application_name=me@laptop", "'postgres://sb@db:5432/sb?application_name=me@laptop'", true},
		{"postgres://db/sb?application_name=me@laptop", "'postgres://db/sb?application_name=me@laptop'", false},
		{"/var/lib/switchboard/switchboard.db", "/var/lib/switchboard/switchboard.db", false},
		{"/srv/my data/sb.db", "'/srv/my data/sb.db'", false},
		{"/srv/it's/sb.db", `'/srv/it'\''s/sb.db'`, false},
	} {
		got, without := Pasteable(c.in)
		if got != c.want || without != c.without {
			t.Errorf("Pasteable(%q) = %q, %v; want %q, %v", c.in, got, without, c.want, c.without)
		}
	}
	// Nothing but a password: the server as pgx reads it (PG* filling in).
	if got, without := Pasteable("password=hunter2"); !strings.HasPrefix(got, "postgres://") || !without || strings.Contains(got, "hunter2") {
		t.Errorf("Pasteable of a password alone = %q, %v; want the server pgx reads, without it", got, without)
	}
}

func TestPgDumpAdviceGivesTheCommand(t *testing.T) {
	t.Setenv("PGOPTIONS", "")
	t.Setenv("PGPASSWORD", "")
	// Nothing listens on port 1: the schema cannot be asked for, and the
	// advice says to name it.
	const unasked = "could not be asked which schema is Switchboard's ("
	for _, c := range []struct {
		db, want string
		password bool // the advice says where the password comes from
	}{
		{"postgres://sb:hunter2@127.0.0.1:1/sb?search_path=switchboard",
			"pg_dump --format=custom --file=switchboard.dump postgres://sb@127.0.0.1:1/sb", true},
		// libpq refuses a search_path, pgx's own settings and names in capitals;
		// pgx's database is libpq's dbname.
		{"host=127.0.0.1 port=1 user=sb password=hunter2 database=sb search_path=sw SEARCH_PATH=x statement_cache_capacity=0",
			"switchboard.dump 'host=127.0.0.1 port=1 user=sb dbname=sb'", true},
		{"postgres://sb:p%40w@[::1]:1,127.0.0.1:1/sb?search_path=x&application_name=a%20b&default_query_exec_mode=simple_protocol&%20search_path=y",
			"switchboard.dump 'postgres://sb@[::1]:1,127.0.0.1:1/sb?application_name=a%20b'", true},
		// A password equal to the user's name keeps the value's other settings.
		{"postgres://postgres:postgres@127.0.0.1:1,127.0.0.1:2/postgres?target_session_attrs=read-write&sslmode=disable",
			"switchboard.dump 'postgres://postgres@127.0.0.1:1,127.0.0.1:2/postgres?target_session_attrs=read-write&sslmode=disable'", true},
		{"host=127.0.0.1 port=1 dbname=sb options='-c search_path=sw'",
			`switchboard.dump 'host=127.0.0.1 port=1 dbname=sb options='\''-c search_path=sw'\'''`, false},
		// ssl=true is sslmode=require to both; an empty setting is none to
		// pgx, which PG* fills in, and left out so that libpq does the same.
		{"postgres://sb@127.0.0.1:1/sb?ssl=true&connect_timeout=2&application_name=",
			"switchboard.dump 'postgres://sb@127.0.0.1:1/sb?ssl=true&connect_timeout=2'", false},
		{"host=127.0.0.1 port=1 dbname=sb user=''", "switchboard.dump 'host=127.0.0.1 port=1 dbname=sb'", false},
	} {
		a := PgDumpAdvice("backup", c.db, "").Error()
		cmd, _ := AdviceCommand(a)
		if !strings.HasSuffix(cmd, c.want) || strings.Contains(a, PasswordNote) != c.password || !strings.Contains(a, unasked) || strings.Contains(a, "hunter2") ||
			strings.Contains(a, "p%40w") || strings.Contains(a, "search_path=sw ") || strings.Contains(a, "statement_cache") ||
			strings.Contains(a, "default_query") || strings.Contains(a, "SEARCH") || strings.Contains(a, "search_path=y") {
			t.Errorf("advice for %q:\n%s\nwant it to hold %q and %q, and no password nor setting libpq refuses", c.db, a, c.want, unasked)
		}
	}
	restore := PgDumpAdvice("restore", "postgres://sb:hunter2@127.0.0.1:1/sb?search_path=switchboard", "").Error()
	if want := "pg_restore --clean --if-exists --dbname=postgres://sb@127.0.0.1:1/sb switchboard.dump"; !strings.Contains(restore, "\n    "+want+"\n") ||
		!strings.Contains(restore, PasswordNote) ||
		!strings.Contains(restore, "--clean drops the schema itself") {
		t.Errorf("advice %q\nwant it to hold %q", restore, want)
	}
	// A value without a password gets no word of one, even if PGPASSWORD holds one.
	t.Setenv("PGPASSWORD", "elsewhere")
	for _, db := range []string{"postgres://sb@127.0.0.1:1/sb", "host=127.0.0.1  port=1 dbname=sb options='-c x=1'"} {
		if a := PgDumpAdvice("backup", db, "").Error(); strings.Contains(a, "PGPASSWORD") || strings.Contains(a, "elsewhere") {
			t.Errorf("advice for %q, which holds no password, speaks of one: %s", db, a)
		}
	}
	// libpq, not pgx, would connect to PGHOSTADDR: the command overrides it.
	t.Setenv("PGHOSTADDR", "127.0.0.2")
	if a := PgDumpAdvice("backup", "host=127.0.0.1 port=1 dbname=sb", "").Error(); !strings.Contains(a, `'host=127.0.0.1 port=1 dbname=sb hostaddr='\'''\'''`) {
		t.Errorf("advice with PGHOSTADDR set: %s", a)
	}
	t.Setenv("PGHOSTADDR", "")
	// A refused value is not repeated.
	if a := PgDumpAdvice("backup", "postgres://db.example?sslmode=require&password=hunter2@2024", "").Error(); strings.Contains(a, "hunter2") ||
		!strings.Contains(a, "YOUR_DATABASE") {
		t.Errorf("advice for a refused value: %s", a)
	}
}

// A connection attempt is bounded when the URL sets no connect_timeout, and a
// parse error says what is wrong without the password.
func TestParsePostgres(t *testing.T) {
	t.Setenv("PGCONNECT_TIMEOUT", "")
	cfg, err := parsePostgres("postgres://sb:hunter2@db/sb")
	if err != nil || cfg.ConnectTimeout != defaultConnectTimeout {
		t.Fatalf("no connect_timeout: %v, %v", cfg.ConnectTimeout, err)
	}
	if cfg, err = parsePostgres("postgres://sb:hunter2@db/sb?connect_timeout=3"); err != nil || cfg.ConnectTimeout != 3*time.Second {
		t.Fatalf("connect_timeout=3: %v, %v", cfg.ConnectTimeout, err)
	}
	_, err = parsePostgres("postgres://sb:hunter2@db:99999/sb")
	if !errors.Is(err, ErrInvalid) || strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "port") {
		t.Fatalf("bad port: %v", err)
	}
}

// A port where something other than PostgreSQL answers, or nothing answers,
// gives a one-line reason, not the protocol's internals, and no hang.
func TestConnectErrorsSayWhatAnswered(t *testing.T) {
	http := listen(t, func(c net.Conn) {
		c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"))
		c.Close()
	})
	silent := listen(t, func(c net.Conn) { t.Cleanup(func() { c.Close() }) })
	for _, c := range []struct{ addr, query, want string }{
		{http, "", "does not speak PostgreSQL's protocol"},
		{silent, "?connect_timeout=1", "no answer within 1s"},
	} {
		_, err := Open(context.Background(), "postgres://sb:hunter2@"+c.addr+"/sb"+c.query, Options{})
		if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), c.want) ||
			!strings.Contains(err.Error(), c.addr) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v; want %q and the address, no password", c.addr, err, c.want)
		}
	}
}

// listen serves each connection on loopback with serve, until the test ends.
func listen(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

// MustExist reports a database that is not there rather than making it: no
// file on SQLite, no tables in the PostgreSQL schema.
func TestMustExistMakesNothing(t *testing.T) {
	db := testkit.DB(t)
	ctx := context.Background()
	_, err := Open(ctx, db, Options{MustExist: true})
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("MustExist on an empty database: %v", err)
	}
	if IsPostgres(db) {
		if tables := countTables(t, db); tables != 0 {
			t.Fatalf("MustExist left %d tables", tables)
		}
	} else if _, err := os.Stat(db); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("MustExist made %s (%v)", db, err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := Open(ctx, db, Options{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(ctx, db, Options{MustExist: true, Logger: quiet})
	if err != nil {
		t.Fatalf("MustExist on a migrated database: %v", err)
	}
	s.Close()
}

// countTables is how many tables the schema db's search_path names holds.
func countTables(t *testing.T, db string) int {
	t.Helper()
	cfg, err := parsePostgres(db)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The pg_dump command backup prints runs as printed (the password, if any,
// from PGPASSWORD).
func TestPgDumpAdviceRuns(t *testing.T) {
	db := testkit.PostgresURL(t)
	pgDump, err := exec.LookPath("pg_dump")
	if err != nil {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_dump")
		if len(matches) == 0 {
			testkit.SkipOrFail(t, "no pg_dump installed: the printed command not run")
			return
		}
		pgDump = matches[len(matches)-1]
	}
	s, err := Open(context.Background(), db, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	cfg, err := pgconn.ParseConfig(db)
	if err != nil {
		t.Fatal(err)
	}
	schema := cfg.RuntimeParams["search_path"]
	// Another schema beside it, which the dump must leave out, and one whose
	// name pg_dump would read as a pattern.
	other := testkit.PostgresURL(t)
	odd := "Odd.S*" + strings.TrimPrefix(schema, "t_")
	conn, err := pgx.Connect(context.Background(), os.Getenv("SWITCHBOARD_TEST_POSTGRES"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(context.Background(), `CREATE SCHEMA "`+odd+`"`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Exec(context.Background(), `DROP SCHEMA "`+odd+`" CASCADE`) })
	oddDB := strings.Replace(db, "search_path="+schema, "search_path="+url.QueryEscape(`"`+odd+`"`), 1)
	for _, db := range []string{other, oddDB} {
		s, err := Open(context.Background(), db, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
	keywords := fmt.Sprintf("host=%s port=%d user=%s dbname=%s", cfg.Host, cfg.Port, cfg.User, cfg.Database)
	t.Setenv("PGOPTIONS", "")
	for _, c := range []struct{ db, schema string }{
		{db, schema},
		{keywords + " search_path=" + schema, schema},
		{keywords + " options='-c search_path=" + schema + "'", schema},
		{keywords + " search_path='nosuch, " + schema + "'", schema}, // the server passes over a schema that is not there
		{oddDB, odd},
	} {
		db, schema := c.db, c.schema
		advice := PgDumpAdvice("backup", db, "").Error()
		cmd, ok := AdviceCommand(advice)
		if !ok || !strings.HasPrefix(cmd, "pg_dump ") {
			t.Fatalf("no command in %q", advice)
		}
		dir := t.TempDir()
		sh := exec.Command("sh", "-c", strings.Replace(cmd, "pg_dump", pgDump, 1))
		sh.Dir = dir
		sh.Env = append(os.Environ(), "PGPASSWORD="+cfg.Password)
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		list, err := exec.Command(filepath.Join(filepath.Dir(pgDump), "pg_restore"), "--list", filepath.Join(dir, "switchboard.dump")).CombinedOutput()
		if err != nil {
			t.Fatalf("pg_restore --list after %s: %v\n%s", cmd, err, list)
		}
		tables := dumpedTable.FindAllStringSubmatch(string(list), -1)
		if !strings.Contains(string(list), " TABLE "+schema+" todos ") {
			t.Fatalf("%s dumped no todos of the schema %s:\n%s", cmd, schema, list)
		}
		for _, m := range tables {
			if m[1] != schema {
				t.Fatalf("%s dumped a table of the schema %s beside %s:\n%s", cmd, m[1], schema, list)
			}
		}
		// The restore it prints puts the tables back in that schema, which
		// it leaves in place.
		table := pgx.Identifier{schema, "schema_migrations"}.Sanitize()
		var before, after int
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&before); err != nil || before == 0 {
			t.Fatalf("%s holds %d rows (%v)", table, before, err)
		}
		if _, err := conn.Exec(context.Background(), `DELETE FROM `+table); err != nil {
			t.Fatal(err)
		}
		restore := PgDumpAdvice("restore", db, "").Error()
		cmd, ok = AdviceCommand(restore)
		if !ok || !strings.HasPrefix(cmd, "pg_restore --clean --if-exists --schema=") {
			t.Fatalf("no restore command naming the schema in %q", restore)
		}
		sh = exec.Command("sh", "-c", strings.Replace(cmd, "pg_restore", filepath.Join(filepath.Dir(pgDump), "pg_restore"), 1))
		sh.Dir = dir
		sh.Env = append(os.Environ(), "PGPASSWORD="+cfg.Password)
		if out, err := sh.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, out)
		}
		if err := conn.QueryRow(context.Background(), `SELECT count(*) FROM `+table).Scan(&after); err != nil || after != before {
			t.Fatalf("after %s %s holds %d rows of %d (%v)", cmd, table, after, before, err)
		}
	}
}

// dumpedTable is a table (or its data) in pg_restore --list, and its schema.
var dumpedTable = regexp.MustCompile(`(?m)^\d+; \d+ \d+ TABLE (?:DATA )?(\S+) `)

// A password pgx finds in PGPASSWORD (or ~/.pgpass) is not the value's: the
// value, which holds none, is pasted as it is, with all its settings.
func TestPasteableKeepsAValueWithoutAPassword(t *testing.T) {
	t.Setenv("PGPASSWORD", "s")
	for _, db := range []string{"host=db.example user=switchboard sslmode=require",
		"postgres://postgres@db.example/switchboard?sslmode=require&target_session_attrs=read-write&connect_timeout=5"} {
		if got, without := pasteable(db); got != db || without {
			t.Errorf("pasteable(%q) = %q, %v; want it as it is", db, got, without)
		}
	}
}

// The command writes and reads the file backup's --to and restore's --from name.
func TestPgDumpAdviceNamesTheArchive(t *testing.T) {
	backup := PgDumpAdvice("backup", "postgres://sb@127.0.0.1:1/sb", "/srv/backups/sb 2026.dump").Error()
	restore := PgDumpAdvice("restore", "postgres://sb@127.0.0.1:1/sb", "/srv/backups/sb 2026.dump").Error()
	if !strings.Contains(backup, "pg_dump --format=custom --file='/srv/backups/sb 2026.dump' ") {
		t.Errorf("backup --to: %s", backup)
	}
	if !strings.Contains(restore, "--dbname=postgres://sb@127.0.0.1:1/sb '/srv/backups/sb 2026.dump'") {
		t.Errorf("restore --from: %s", restore)
	}
}

// A client key's passphrase is cut from the command like the password, and the
// advice says pg_dump will ask for it.
func TestPgDumpAdviceNamesACutKeyPassphrase(t *testing.T) {
	const note = "passphrase (sslpassword) is left out"
	for db, want := range map[string]bool{
		"postgres://sb@127.0.0.1:1/sb?sslkey=/k.pem&sslpassword=s3cret":      true,
		"host=127.0.0.1 port=1 dbname=sb sslkey=/k.pem sslpassword='s3cret'": true,
		"postgres://sb:pw@127.0.0.1:1/sb?sslkey=/k.pem":                      false,
		"host=127.0.0.1 port=1 dbname=sb sslpassword=''":                     false,
	} {
		a := PgDumpAdvice("backup", db, "").Error()
		if strings.Contains(a, note) != want || strings.Contains(a, "s3cret") {
			t.Errorf("advice for %q:\n%s\nwant the note %q: %v, and no passphrase", db, a, note, want)
		}
	}
}

// An archive of one schema restored under a --db of another: the printed
// command restores the archive's schema (pg_restore --schema with the --db's
// would restore nothing, and exit 0), and says where the tables went.
func TestRestoreAdviceFollowsTheArchivesSchema(t *testing.T) {
	from := testkit.PostgresURL(t)
	pgDump, err := exec.LookPath("pg_dump")
	if err != nil {
		testkit.SkipOrFail(t, "no pg_dump on PATH: the archive not made")
		return
	}
	ctx := context.Background()
	s, err := Open(ctx, from, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	addTodos(t, s, "inbox", 1)
	s.Close()
	cfg, err := pgconn.ParseConfig(from)
	if err != nil {
		t.Fatal(err)
	}
	schema := cfg.RuntimeParams["search_path"]
	archive := filepath.Join(t.TempDir(), "switchboard.dump")
	base := os.Getenv("SWITCHBOARD_TEST_POSTGRES")
	if out, err := exec.Command(pgDump, "--format=custom", "--file="+archive, "--schema="+schema, base).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	into := testkit.PostgresURL(t) // another schema, empty
	advice := PgDumpAdvice("restore", into, archive).Error()
	cmd, _ := AdviceCommand(advice)
	if !strings.Contains(cmd, "--schema="+schema+" ") || !strings.Contains(advice, "The archive's tables are in the schema "+schema) {
		t.Fatalf("restore advice for an archive of %s: %s", schema, advice)
	}
	// As in a new database: the schema there, without its tables.
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DROP SCHEMA `+schema+` CASCADE; CREATE SCHEMA `+schema); err != nil {
		t.Fatal(err)
	}
	sh := exec.Command("sh", "-c", cmd)
	sh.Env = append(os.Environ(), "PGPASSWORD="+cfg.Password)
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", cmd, err, out)
	}
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.todos`).Scan(&n); err != nil || n != 1 {
		t.Errorf("after %s: %d todos in %s (%v)", cmd, n, schema, err)
	}
}
