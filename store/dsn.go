package store

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The --db value: a SQLite file's path, or a PostgreSQL server named as libpq
// names one, a postgres:// or postgresql:// URL or a string of keyword=value
// settings (host=db.example port=5432 dbname=switchboard), the PG* variables
// filling in what it leaves out. Whatever holds a password is shown only with
// the password masked (Redacted), or left out (Pasteable).

// IsPostgres reports whether db, the --db value, names a PostgreSQL server
// rather than a SQLite file: a postgres:// or postgresql:// URL (in any case:
// one in capitals is refused by CheckDB, never taken for a file), or libpq's
// keyword=value settings.
func IsPostgres(db string) bool {
	lower := strings.ToLower(strings.TrimSpace(db))
	return strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") ||
		keywordDSN.MatchString(db)
}

// keywordDSN matches libpq's keyword=value settings: they begin with one of its
// keywords (a file's name hardly does), after any space.
var keywordDSN = regexp.MustCompile(`^[\pZ\s\v]*(` + strings.Join(libpqKeywords, "|") + `)[\s\v]*=`)

// keywordDSNAnyCase is keywordDSN in any case: a --db that matches it and not
// keywordDSN is settings mistyped, not a SQLite file's name.
var keywordDSNAnyCase = regexp.MustCompile(`(?i)` + keywordDSN.String())

// libpqKeywords are the connection settings libpq knows (PostgreSQL 17's).
var libpqKeywords = []string{"host", "hostaddr", "port", "dbname", "user", "password", "passfile",
	"require_auth", "channel_binding", "connect_timeout", "client_encoding", "options", "application_name",
	"fallback_application_name", "keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count",
	"tcp_user_timeout", "replication", "gssencmode", "sslmode", "requiressl", "sslnegotiation",
	"sslcompression", "sslcert", "sslkey", "sslkeylogfile", "sslpassword", "sslcertmode", "sslrootcert",
	"sslcrl", "sslcrldir", "sslsni", "requirepeer", "ssl_min_protocol_version", "ssl_max_protocol_version",
	"min_protocol_version", "max_protocol_version", "krbsrvname", "gsslib", "gssdelegation", "service",
	"target_session_attrs", "load_balance_hosts", "servicefile", "pool_max_conns", "pool_min_conns"}

// CheckDB refuses a --db value that is neither a SQLite file's path nor
// something pgx reads as a PostgreSQL server, without repeating it (it may hold
// a password): a URL of another scheme, a postgres:// URL in capitals, a URL
// whose user, password or database name holds an @, a /, a ? or a # that is
// not percent-encoded. libpq and pgx end the password at the first @ before the
// first /, other URL readers at the last @: the rest of such a password would
// be taken for the host or the database, and shown as such.
func CheckDB(db string) error {
	if IsPostgres(db) {
		if keywordDSN.MatchString(db) {
			return nil
		}
		scheme, rest, _ := strings.Cut(strings.TrimSpace(db), "://")
		if scheme != strings.ToLower(scheme) {
			return fmt.Errorf("store: --db: write the URL's scheme as %s:// (PostgreSQL reads it in lower case only): %w",
				strings.ToLower(scheme), ErrInvalid)
		}
		netloc, after, _ := strings.Cut(rest, "/")
		path, _, _ := strings.Cut(after, "?")
		// With no @ before the first /, an @ after it followed by host/database
		// ends a user or password with an unencoded / in it, which libpq would
		// read as host, port and database (an @ in a query's value is fine).
		// A ? or # before the @ would start the query for other URL readers,
		// but not for libpq and pgx, which take all of it for the user: a
		// password= in it would be shown as the user's name.
		at := strings.LastIndex(after, "@")
		user, _, hasUser := strings.Cut(netloc, "@")
		if strings.Count(netloc, "@") > 1 || strings.Contains(path, "@") ||
			(!strings.Contains(netloc, "@") && at >= 0 && strings.Contains(after[at:], "/")) ||
			(hasUser && strings.ContainsAny(user, "?#")) {
			return fmt.Errorf("store: --db: the URL's user, password or database name holds an @, /, ? or # that "+
				"is not percent-encoded: write them as %%40, %%2F, %%3F and %%23 (or give the password in PGPASSWORD or "+
				"~/.pgpass): %w", ErrInvalid)
		}
		return nil
	}
	if anyPassword.MatchString(db) {
		return fmt.Errorf("store: --db holds a password= setting but is no postgres:// URL and does not begin "+
			"with a libpq keyword (host=, dbname=, user=, …) in lower case: %w", ErrInvalid)
	}
	if m := keywordDSNAnyCase.FindStringSubmatch(db); m != nil {
		return fmt.Errorf("store: --db begins like libpq settings, but with %s= where libpq reads %s= "+
			"(its settings are in lower case): %w", m[1], strings.ToLower(m[1]), ErrInvalid)
	}
	if scheme, _, ok := strings.Cut(strings.TrimSpace(db), ":"); ok && slices.Contains([]string{"postgres", "postgresql"}, strings.ToLower(scheme)) {
		// postgresql:user@host is no file anyone means: it would be opened as a
		// new SQLite database of that name in the working directory.
		return fmt.Errorf("store: --db begins with %s: but not %s://: write the URL as %s://user@host/database: %w",
			scheme, scheme, strings.ToLower(scheme), ErrInvalid)
	}
	if scheme, _, ok := strings.Cut(db, "://"); ok && !strings.ContainsAny(scheme, `/\`) {
		return fmt.Errorf("store: --db: a %s:// URL names no database Switchboard opens: "+
			"give a SQLite file's path, or a postgres:// URL: %w", scheme, ErrInvalid)
	}
	return nil
}

// defaultConnectTimeout bounds a connection attempt whose --db sets none
// (connect_timeout, PGCONNECT_TIMEOUT): a port that takes the connection and
// never answers would otherwise hold a command or serve's start for ever.
const defaultConnectTimeout = 10 * time.Second

// parsePostgres reads db as pgx does (the PG* variables filling in), after
// CheckDB. Its errors never hold the password.
func parsePostgres(db string) (*pgx.ConnConfig, error) {
	if err := CheckDB(db); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig(strings.TrimSpace(db)) // as IsPostgres reads it
	if err != nil {
		return nil, fmt.Errorf("store: %s does not read as a PostgreSQL URL or settings: %s: %w", Redacted(db), parseProblem(err), ErrInvalid)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	cfg.DialFunc = pgDialFunc(cfg.ConnectTimeout)
	return cfg, nil
}

// parseProblem is what pgx found wrong with a connection string: its first
// words only, as pgx's details may quote a part of the string, which a
// password written unencoded could be.
func parseProblem(err error) string {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return "unreadable"
	}
	msg := pe.Error()
	if inner := errors.Unwrap(pe); inner != nil {
		msg = strings.TrimSuffix(msg, " ("+inner.Error()+")")
	}
	if i := strings.LastIndex(msg, "`: "); i >= 0 && strings.HasPrefix(msg, "cannot parse `") {
		msg = msg[i+3:]
	}
	// What follows a colon is a value pgx quotes back, decoded ("unknown
	// target_session_attrs value: …"): the value may be a password's piece.
	msg, _, _ = strings.Cut(msg, ":")
	// pgx masks the value it quotes at its best only: if any word of the value
	// other than a setting's name is still in what is left, none of it is said.
	for _, word := range strings.FieldsFunc(pe.ConnString, func(r rune) bool {
		return unicode.IsSpace(r) || strings.ContainsRune(`=&?/:@,'"\`, r)
	}) {
		if len(word) >= 3 && !slices.Contains(libpqKeywords, strings.ToLower(word)) && strings.Contains(msg, word) {
			return "unreadable"
		}
	}
	return msg
}

// Redacted is a --db value as a message or log line may show it: a SQLite path
// as it is; for PostgreSQL, the server as pgx reads the value (user, hosts and
// ports, database, search_path: see pgServerURL), which holds no part of
// a password however it was written.
func Redacted(db string) string {
	if CheckDB(db) != nil {
		return "the --db value" // refused: its text may hold a password, misread
	}
	if !IsPostgres(db) {
		return db
	}
	cfg, err := pgconn.ParseConfig(strings.TrimSpace(db))
	if err != nil {
		return "the PostgreSQL --db value"
	}
	return pgServerURL(cfg)
}

// pgServerURL names the server cfg dials as a URL without a password:
// postgres://user@host:port/database, with its fallback hosts (a socket
// directory percent-encoded, as libpq takes it) and the search_path if one is
// set.
func pgServerURL(cfg *pgconn.Config) string {
	var hosts []string
	for _, c := range append([]*pgconn.FallbackConfig{{Host: cfg.Host, Port: cfg.Port}}, cfg.Fallbacks...) {
		host := c.Host
		if strings.HasPrefix(host, "/") {
			host = strings.ReplaceAll(url.PathEscape(host), "/", "%2F")
		}
		if h := net.JoinHostPort(host, strconv.Itoa(int(c.Port))); !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	out := "postgres://" + url.User(cfg.User).String() + "@" + strings.Join(hosts, ",") + "/" + url.PathEscape(cfg.Database)
	if sp := cfg.RuntimeParams["search_path"]; sp != "" {
		out += "?search_path=" + url.QueryEscape(sp)
	}
	return out
}

// stripURLPassword is raw, a URL, without its passwords: the user's (from the
// colon after the user to the last @ before the path, so that the whole of a
// password with an unencoded @ or ? goes), and the query parameters that pgx
// reads as password or sslpassword (their names decoded as pgx decodes them).
func stripURLPassword(raw string) string {
	scheme, rest, _ := strings.Cut(raw, "://")
	netloc, _, _ := strings.Cut(rest, "/")
	if at := strings.LastIndex(netloc, "@"); at >= 0 {
		if user, _, ok := strings.Cut(rest[:at], ":"); ok {
			rest = user + rest[at:]
		}
	}
	return cutQuery(scheme+"://"+rest, "password", "sslpassword")
}

// cutQuery is raw, a URL, without the query parameters named (their names
// decoded as pgx decodes them), the others left as written.
func cutQuery(raw string, names ...string) string {
	base, query, hasQuery := strings.Cut(raw, "?")
	if !hasQuery {
		return raw
	}
	var params []string
	for _, p := range strings.Split(query, "&") {
		k, _, _ := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if !slices.Contains(names, name) {
			params = append(params, p)
		}
	}
	if len(params) == 0 {
		return base
	}
	return base + "?" + strings.Join(params, "&")
}

// PasswordElsewhere follows a command printed without the password its --db
// held (see Pasteable).
const PasswordElsewhere = " (with the password in PGPASSWORD or ~/.pgpass)"

// Pasteable is a PostgreSQL --db value as a command the user pastes may take it:
// without its password (which masked would not work), quoted for a POSIX shell;
// withoutPassword says one was left out, to be given by PGPASSWORD or ~/.pgpass.
// A SQLite path is quoted only if the shell would split it.
func Pasteable(db string) (arg string, withoutPassword bool) {
	plain, withoutPassword := pasteable(db)
	return shellQuote(plain), withoutPassword
}

// pasteable is Pasteable unquoted. The value with its password settings cut
// out is taken only if pgx still reads it, the same server, and no password
// is left in it (an odd spelling the cut missed); otherwise the server as pgx
// reads it (pgServerURL), without the value's other settings.
func pasteable(db string) (plain string, withoutPassword bool) {
	if CheckDB(db) != nil {
		return "YOUR_DATABASE", false // refused: its text may hold a password, misread
	}
	if !IsPostgres(db) {
		return db, false
	}
	db = strings.TrimSpace(db)
	cfg, err := pgconn.ParseConfig(db)
	if err != nil {
		return "YOUR_POSTGRESQL_URL", false // pgx cannot read it: nothing of it can be shown
	}
	cut := stripURLPassword(db)
	if keywordDSN.MatchString(db) {
		cut = stripKeywordPassword(db)
	}
	if cut == db && !passwordLeft(db, "") {
		return db, false // it holds no password: pgx found one, if any, in PGPASSWORD or ~/.pgpass
	}
	// A password that is also the user's name, the database's or a host's is
	// shown as that, whatever is done: it does not send the value to
	// pgServerURL, which keeps none of its other settings.
	password := cfg.Password
	if password == cfg.User || password == cfg.Database || password == cfg.Host {
		password = ""
	}
	if cut == "" || passwordLeft(cut, password) || !sameServers(cut, cfg) {
		return pgServerURL(cfg), true
	}
	return cut, cut != db
}

// passwordLeft reports whether s, a --db value with its password settings cut
// out, may still hold one: a password setting by any spelling, or password,
// the one pgx read from the whole value, in it as written or decoded.
func passwordLeft(s, password string) bool {
	decoded, err := url.PathUnescape(s)
	if err != nil {
		decoded = s
	}
	for _, t := range []string{s, decoded} {
		if anyPassword.MatchString(t) || (password != "" && strings.Contains(t, password)) {
			return true
		}
	}
	return false
}

// anyPassword is a password setting in any spelling libpq or pgx might read.
var anyPassword = regexp.MustCompile(`(?i)password[\s\v]*=`)

// PasteableDB is Pasteable of the database s opened: what a command printed for
// the user to paste names it by.
func (s *Store) PasteableDB() (arg string, withoutPassword bool) {
	if s.pg {
		return Pasteable(s.dsn)
	}
	return Pasteable(s.path)
}

// shellQuote is s as one word of a POSIX shell.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`&;|<>()*?[]{}#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// stripKeywordPassword is libpq keyword=value settings without their password
// and sslpassword, read setting by setting as pgx reads them (a password= in
// another setting's quoted value is that value's), each written back quoted
// where it needs to be; "" when they do not read.
func stripKeywordPassword(s string) string {
	settings, ok := keywordSettings(s)
	if !ok {
		return ""
	}
	kept := slices.DeleteFunc(settings, func(kv [2]string) bool { return kv[0] == "password" || kv[0] == "sslpassword" })
	return keywordText(kept)
}

// keywordSettings reads libpq keyword=value settings as pgx reads them, in
// order; ok is false when they do not read.
func keywordSettings(s string) (settings [][2]string, ok bool) {
	const space = " \t\n\r\v\f"
	s = strings.TrimLeftFunc(s, unicode.IsSpace)
	for len(s) > 0 {
		eq := strings.IndexByte(s, '=')
		if eq < 0 {
			return nil, false
		}
		key := strings.Trim(s[:eq], space)
		s = strings.TrimLeft(s[eq+1:], space)
		var val strings.Builder
		quoted := len(s) > 0 && s[0] == '\''
		if quoted {
			s = s[1:]
		}
		i := 0
		for ; i < len(s); i++ {
			c := s[i]
			if (quoted && c == '\'') || (!quoted && strings.IndexByte(space, c) >= 0) {
				break
			}
			if c == '\\' {
				if i++; i == len(s) {
					break
				}
				c = s[i]
			}
			val.WriteByte(c)
		}
		if quoted {
			if i >= len(s) {
				return nil, false // unterminated
			}
			i++
		}
		s = strings.TrimLeft(s[min(i, len(s)):], space)
		settings = append(settings, [2]string{key, val.String()})
	}
	return settings, true
}

// keywordText writes settings as keyword=value settings, each value quoted
// where it needs to be.
func keywordText(settings [][2]string) string {
	const space = " \t\n\r\v\f"
	out := make([]string, 0, len(settings))
	for _, kv := range settings {
		v := kv[1]
		if v == "" || strings.ContainsAny(v, space+"'\\") {
			v = "'" + strings.NewReplacer("\\", "\\\\", "'", "\\'").Replace(v) + "'"
		}
		out = append(out, kv[0]+"="+v)
	}
	return strings.Join(out, " ")
}
