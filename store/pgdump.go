package store

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Backup and restore on PostgreSQL are pg_dump's and pg_restore's: Switchboard's
// backup and restore refuse there and print the command to paste, for the --db
// value given. pg_dump reads its connection through libpq, which is stricter
// than pgx: it refuses settings it does not know (pgx's own, a search_path), so
// the command carries only libpq's settings of the value. It names the schema
// Switchboard uses, as the server resolves it, so that pg_dump dumps that schema
// alone, never the rest of a shared database.

// pgDumpAdvice refuses a SQLite-only file operation on PostgreSQL, with the
// command that does the job there.
func (s *Store) pgDumpAdvice(what, archive string) error { return PgDumpAdvice(what, s.dsn, archive) }

// PgDumpAdvice is pgDumpAdvice for a --db value, before any store is open (the
// CLI's backup and restore, which lock and change nothing). what is "backup"
// or "restore"; archive is the file the command writes or reads (backup's
// --to, restore's --from; "" is switchboard.dump). The command may be pasted
// as it is, the password
// (never shown) coming from PGPASSWORD or ~/.pgpass. It asks the server which
// schema Switchboard's tables are in, and names it: pg_dump then dumps that
// schema alone, and pg_restore replaces the tables in it but not the schema
// itself (a role that owns its schema in a shared database may drop it but not
// create it again). If the server cannot say, the command says to name it.
// A restore file pg_restore --list refuses gets no pg_restore command: a plain
// SQL dump of pg_dump's gets psql's, and anything else that does not begin as
// an archive is refused (ErrNotSwitchboard) with pg_restore's reason.
func PgDumpAdvice(what, db, archive string) error {
	if archive == "" {
		archive = "switchboard.dump"
	}
	rawArchive := archive
	plain, readErr, listing := false, "", ""
	if what == "restore" {
		refusal := pgRestoreRefusal(rawArchive)
		listing = refusal.listing
		switch {
		case refusal.plainSQL:
			plain = true
		case refusal.archiveLike:
			readErr = refusal.reason
		case refusal.reason != "":
			return &notAnArchive{fmt.Sprintf("store: restore: %s is neither a SQLite database nor a pg_dump archive "+
				"(pg_restore --list says: %s)", rawArchive, refusal.reason)}
		}
	}
	archive = shellQuote(archive)
	server, withoutPassword := libpqTarget(db)
	var notes []string
	if withoutPassword {
		notes = append(notes, PasswordNote)
	}
	if hasSSLPassword(db) {
		asks := "pg_dump and pg_restore ask"
		if plain {
			asks = "psql asks"
		}
		notes = append(notes, "The client key's passphrase (sslpassword) is left out too: "+asks+" for it.")
	}
	schema, serving, err := pgSchemaInUse(db)
	if what == "restore" && serving > 0 {
		notes = append(notes, fmt.Sprintf("A serve runs on this schema now (%d process(es) beat in the last minute): "+
			"stop every one first.", serving))
	}
	only := ""
	if err == nil {
		// pg_dump reads --schema as a pattern, pg_restore as the name itself.
		only = "--schema=" + shellQuote(schemaPattern(schema)) + " "
		if what == "restore" {
			only = "--schema=" + shellQuote(schema) + " "
		}
	} else if !plain { // psql takes no --schema
		without := "the archive holds every schema of the database"
		if what == "restore" {
			without = "--clean drops the schema itself and re-creates it, which a role that only owns its schema may not do"
		}
		notes = append(notes, fmt.Sprintf("The server could not be asked which schema is Switchboard's (%v): "+
			"add --schema=THAT_SCHEMA, or %s.", Reason(err, ErrUnreachable), without))
	}
	if plain {
		dbSchema := "THAT_SCHEMA"
		if err == nil {
			dbSchema = schema
		}
		notes = append(notes, fmt.Sprintf("psql runs the dump's statements as they are: its tables go to the schema the "+
			"dump names, whatever the --db's (%s); if that is another, give serve that schema (search_path=THAT_SCHEMA in --db). "+
			"A dump made without --clean replaces nothing: its tables, and a schema it creates, must not exist yet. "+
			"In one transaction that stops at its first error, a failure changes nothing.", dbSchema))
	}
	if readErr != "" {
		notes = append(notes, fmt.Sprintf("pg_restore --list here refuses it: %s.", strings.TrimSuffix(readErr, ".")))
	}
	if what == "restore" && err == nil && !plain && readErr == "" {
		// pg_restore --schema restores that schema's tables, under its name:
		// an archive of another schema would restore nothing, and say nothing.
		if in := archiveSchema(rawArchive, schema, listing); in != "" {
			only = "--schema=" + shellQuote(in) + " "
			notes = append(notes, fmt.Sprintf("The archive's tables are in the schema %s, the --db's in %s: "+
				"pg_restore puts them back in %s, which must exist (CREATE SCHEMA … AUTHORIZATION the role); "+
				"then give serve that schema (search_path=%s in --db).", in, schema, in, in))
		}
	}
	var head, command string
	if plain {
		head = "restore works on a SQLite file; " + rawArchive + " is a plain SQL dump of pg_dump's, which pg_restore " +
			"does not read: stop serve and run it with psql:"
		command = fmt.Sprintf("psql --single-transaction --set ON_ERROR_STOP=1 --dbname=%s -f %s", shellQuote(server), archive)
	} else if what == "restore" {
		head = "restore works on a SQLite file; on PostgreSQL, stop serve and restore pg_dump's archive with pg_restore:"
		command = fmt.Sprintf("pg_restore --clean --if-exists %s--dbname=%s %s", only, shellQuote(server), archive)
	} else {
		head = what + " works on a SQLite file; on PostgreSQL, back up with pg_dump (serve may keep running):"
		command = fmt.Sprintf("pg_dump --format=custom --file=%s %s%s", archive, only, shellQuote(server))
		notes = append(notes, "To restore it, stop serve: switchboard restore --from prints the pg_restore command.")
	}
	msg := "store: " + head + "\n\n" + adviceIndent + command
	if len(notes) > 0 {
		msg += "\n\n" + strings.Join(notes, " ")
	}
	return &sqliteOnlyAdvice{msg}
}

// notAnArchive is PgDumpAdvice's refusal of a file that is neither a SQLite
// database nor an archive of pg_dump's: ErrNotSwitchboard, with pg_restore's
// reason.
type notAnArchive struct{ msg string }

func (e *notAnArchive) Error() string { return e.msg }
func (e *notAnArchive) Unwrap() error { return ErrNotSwitchboard }

// hasSSLPassword reports whether a --db value gives a client key's passphrase,
// which the printed command leaves out with the password.
func hasSSLPassword(db string) bool {
	if CheckDB(db) != nil {
		return false
	}
	db = strings.TrimSpace(db)
	if keywordDSN.MatchString(db) {
		settings, _ := keywordSettings(db)
		return slices.ContainsFunc(settings, func(kv [2]string) bool { return kv[0] == "sslpassword" && kv[1] != "" })
	}
	u, err := url.Parse(db)
	return err == nil && u.Query().Get("sslpassword") != ""
}

// PasswordNote follows a command PgDumpAdvice cut the password out of.
const PasswordNote = "Run it with the password in PGPASSWORD or ~/.pgpass."

// adviceIndent sets the command apart from the lines around it.
const adviceIndent = "    "

// AdviceCommand is the command an advice of PgDumpAdvice gives: its line.
func AdviceCommand(advice string) (string, bool) {
	for _, line := range strings.Split(advice, "\n") {
		if cmd, ok := strings.CutPrefix(line, adviceIndent); ok {
			return cmd, true
		}
	}
	return "", false
}

// sqliteOnlyAdvice is PgDumpAdvice's error: ErrSQLiteOnly, with the command to
// paste on a line of its own.
type sqliteOnlyAdvice struct{ msg string }

func (e *sqliteOnlyAdvice) Error() string { return e.msg }
func (e *sqliteOnlyAdvice) Unwrap() error { return ErrSQLiteOnly }

// pgSchemaInUse asks the server db names which schema a connection made with
// db creates tables in (Switchboard's), and how many serve processes beat on
// that schema in the last minute.
func pgSchemaInUse(db string) (schema string, serving int, err error) {
	if !IsPostgres(db) {
		return "", 0, fmt.Errorf("the --db value names no PostgreSQL server")
	}
	cfg, err := parsePostgres(db) // refuses what CheckDB refuses
	if err != nil {
		return "", 0, fmt.Errorf("the --db value does not read")
	}
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > pgSchemaTimeout {
		cfg.ConnectTimeout = pgSchemaTimeout
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*pgSchemaTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", 0, connectError(cfg, err)
	}
	defer conn.Close(context.Background())
	var current *string
	var fleet bool
	if err := conn.QueryRow(ctx, `SELECT current_schema(), to_regclass('processes') IS NOT NULL`).Scan(&current, &fleet); err != nil {
		return "", 0, fmt.Errorf("read current_schema(): %w", err)
	}
	if current == nil {
		return "", 0, fmt.Errorf("no schema of its search_path exists")
	}
	if fleet {
		// Not knowing is no reason to hold back the command: 0.
		conn.QueryRow(ctx, pgServingCount).Scan(&serving)
	}
	return *current, serving, nil
}

// pgSchemaTimeout bounds the advice's question to the server.
const pgSchemaTimeout = 3 * time.Second

// schemaPattern is a schema's name as a pg_dump pattern that matches it alone:
// in double quotes (its own doubled) unless it is a lower-case identifier,
// so that * ? . and capitals in it are the name's.
func schemaPattern(name string) string {
	if plainIdent.MatchString(name) {
		return name
	}
	return `"` + strings.ReplaceAll(name, `"`, `""`) + `"`
}

var plainIdent = regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)

// libpqTarget is db as pg_dump and pg_restore are to be given it: its settings
// that libpq knows, as the value writes them, without its passwords (a URL's
// user password, password= and sslpassword= settings), pgx's name database
// written dbname, and nothing else (libpq refuses what it does not know: pgx's
// own settings, a search_path). It is taken only if pgx reads it as the same
// servers, database and user as db; otherwise the servers as pgx reads db
// (pgServerURL). withoutPassword says db gave a password that the command
// leaves to PGPASSWORD or ~/.pgpass.
func libpqTarget(db string) (plain string, withoutPassword bool) {
	if CheckDB(db) != nil {
		return "YOUR_DATABASE", false // refused: its text may hold a password, misread
	}
	db = strings.TrimSpace(db)
	cfg, err := pgconn.ParseConfig(db)
	if err != nil {
		return "YOUR_POSTGRESQL_URL", false // pgx cannot read it: nothing of it can be shown
	}
	var ok bool
	if keywordDSN.MatchString(db) {
		plain, withoutPassword, ok = libpqKeywordSettings(db)
	} else {
		plain, withoutPassword, ok = libpqURL(db)
	}
	if !ok || plain == "" || !sameServers(plain, cfg) {
		return pgServerURL(cfg), cfg.Password != ""
	}
	return plain, withoutPassword
}

// libpqKeywordSettings is libpqTarget of keyword=value settings.
func libpqKeywordSettings(db string) (plain string, hadPassword, ok bool) {
	settings, ok := keywordSettings(db)
	if !ok {
		return "", false, false
	}
	kept := settings[:0:0]
	for _, kv := range settings {
		switch key := kv[0]; {
		case key == "password" || key == "sslpassword":
			hadPassword = true
		case kv[1] == "":
			// pgx takes an empty setting as none (PG* fills it in), libpq as
			// set: left out, libpq reads the PG* variable as pgx did.
		case key == "database":
			kept = append(kept, [2]string{"dbname", kv[1]})
		case libpqSetting(key):
			kept = append(kept, kv)
		}
	}
	if pgHostaddrEnv() && !slices.ContainsFunc(kept, func(kv [2]string) bool { return kv[0] == "hostaddr" }) {
		kept = append(kept, [2]string{"hostaddr", ""})
	}
	return keywordText(kept), hadPassword, true
}

// pgHostaddrEnv reports whether PGHOSTADDR is set: libpq connects there rather
// than to the host, pgx does not read it. An empty hostaddr setting in the
// command overrides it.
func pgHostaddrEnv() bool { return os.Getenv("PGHOSTADDR") != "" }

// libpqURL is libpqTarget of a URL.
func libpqURL(db string) (plain string, hadPassword, ok bool) {
	stripped := stripURLPassword(db)
	base, query, _ := strings.Cut(stripped, "?")
	// A user's password gone leaves no colon in the user part.
	_, rest, _ := strings.Cut(base, "://")
	netloc, _, _ := strings.Cut(rest, "/")
	if user, _, found := strings.Cut(netloc, "@"); found && strings.Contains(user, ":") {
		return "", false, false
	}
	hadPassword = stripped != db
	var params []string
	for _, p := range strings.Split(query, "&") {
		if p == "" {
			continue
		}
		k, v, _ := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			return "", false, false
		}
		switch name = strings.TrimSpace(name); {
		case v == "":
			// As for keyword settings: an empty one is none to pgx.
		case name == "database":
			params = append(params, "dbname="+v)
		case libpqSetting(name) || name == "ssl": // ssl=true: sslmode=require, to both
			params = append(params, url.QueryEscape(name)+"="+v)
		}
	}
	if pgHostaddrEnv() && !slices.ContainsFunc(params, func(p string) bool { return strings.HasPrefix(p, "hostaddr=") }) {
		params = append(params, "hostaddr=")
	}
	if len(params) == 0 {
		return base, hadPassword, true
	}
	return base + "?" + strings.Join(params, "&"), hadPassword, true
}

// libpqSetting reports whether libpq takes key as a connection setting
// (other than a password).
func libpqSetting(key string) bool {
	return slices.Contains(libpqKeywords, key) && key != "password" && key != "sslpassword" &&
		!strings.HasPrefix(key, "pool_")
}

// sameServers reports whether plain, read as pgx reads it, names the servers
// (and their order), database and user that cfg does.
func sameServers(plain string, cfg *pgconn.Config) bool {
	again, err := pgconn.ParseConfig(plain)
	if err != nil || again.Host != cfg.Host || again.Port != cfg.Port || again.Database != cfg.Database ||
		again.User != cfg.User || len(again.Fallbacks) != len(cfg.Fallbacks) {
		return false
	}
	for i, f := range cfg.Fallbacks {
		if again.Fallbacks[i].Host != f.Host || again.Fallbacks[i].Port != f.Port {
			return false
		}
	}
	return true
}

// archiveTable is a table in pg_restore --list (its catalog is pg_class, 1259;
// its data's line has 0 there), and what follows: its schema, name and owner,
// each as it is, spaces and all.
var archiveTable = regexp.MustCompile(`(?m)^\d+; 1259 \d+ TABLE (.+)$`)

// archiveTimeout bounds all that archiveSchema asks of pg_restore.
var archiveTimeout = 10 * time.Second

// archiveSchema is the one other schema than schema that the tables of the
// pg_dump archive at path are in; "" when they are in schema, in several, or
// when there is no such file, no pg_restore at hand, or no answer in time.
// pg_restore --list writes names as they are, spaces and all, so a name is
// taken only once pg_restore, asked for that schema alone (--schema), lists
// every table. listing is pg_restore --list's output for the whole archive,
// when it was already asked ("" otherwise).
func archiveSchema(path, schema, listing string) string {
	if _, err := os.Stat(path); err != nil {
		return ""
	}
	bin, err := exec.LookPath("pg_restore")
	if err != nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
	defer cancel()
	tables := func(only ...string) []string {
		out := []byte(listing)
		if len(only) > 0 || listing == "" {
			var err error
			if out, err = exec.CommandContext(ctx, bin, append([]string{"--list"}, append(only, path)...)...).Output(); err != nil {
				return nil
			}
		}
		lines := archiveTable.FindAllStringSubmatch(string(out), -1)
		rests := make([]string, len(lines))
		for i, m := range lines {
			rests[i] = m[1]
		}
		return rests
	}
	all := tables()
	if len(all) == 0 || len(tables("--schema="+schema)) > 0 {
		return ""
	}
	// The schema is some words of the first line's, before a table's name and
	// its owner.
	words := strings.Split(all[0], " ")
	for k := 1; k <= len(words)-2; k++ {
		candidate := strings.Join(words[:k], " ")
		if candidate != schema && len(tables("--schema="+candidate)) == len(all) {
			return candidate
		}
	}
	return ""
}

// refusal is what pg_restore --list makes of a file restore is to read.
type refusal struct {
	reason      string // pg_restore's one line when it refuses the file; "" when it reads it, or cannot be asked
	plainSQL    bool   // the file is a plain SQL dump of pg_dump's, for psql
	archiveLike bool   // the file begins as an archive does: pg_restore here may be older than the pg_dump that wrote it
	listing     string // what pg_restore --list wrote when it read the file
}

// plainDumpHeader is how pg_dump's plain SQL output begins (pg_restore's own
// test for it, which pg_dumpall's "cluster dump" does not pass).
const plainDumpHeader = "--\n-- PostgreSQL database dump\n"

// pgRestoreRefusal asks pg_restore --list whether it reads the file or
// directory at path, and when it refuses, what the file is. It asks nothing,
// and finds nothing refused, when there is no such file, no pg_restore at
// hand, no answer in time, or no reading the file's first bytes.
func pgRestoreRefusal(path string) refusal {
	info, err := os.Stat(path)
	if err != nil || IsSQLiteFile(path) { // the CLI copies a SQLite file in
		return refusal{}
	}
	bin, err := exec.LookPath("pg_restore")
	if err != nil {
		return refusal{}
	}
	ctx, cancel := context.WithTimeout(context.Background(), archiveTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--list", path)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err == nil {
		return refusal{listing: stdout.String()}
	}
	if ctx.Err() != nil {
		return refusal{}
	}
	// Its error's line, or failing that its first: warnings may come first.
	var r refusal
	for _, line := range strings.Split(stderr.String(), "\n") {
		line = strings.TrimPrefix(strings.TrimSpace(line), "pg_restore: ")
		if reason, ok := strings.CutPrefix(line, "error: "); ok {
			r.reason = reason
			break
		}
		if r.reason == "" {
			r.reason = line
		}
	}
	if r.reason == "" {
		r.reason = "it exits with an error and says nothing"
	}
	if info.IsDir() {
		// A directory archive is its toc.dat (pg_restore also takes it compressed).
		for _, toc := range []string{"toc.dat", "toc.dat.gz", "toc.dat.lz4", "toc.dat.zst"} {
			if _, err := os.Stat(filepath.Join(path, toc)); err == nil {
				r.archiveLike = true
			}
		}
		return r
	}
	f, err := os.Open(path)
	if err != nil {
		return refusal{}
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	switch {
	case strings.HasPrefix(string(head), plainDumpHeader):
		r.plainSQL = true
	case strings.HasPrefix(string(head), "PGDMP"), // custom format
		n == 512 && strings.HasPrefix(string(head[257:]), "ustar"): // tar
		r.archiveLike = true
	}
	return r
}
