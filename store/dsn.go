package store

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

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
// keywords (a file's name hardly does).
var keywordDSN = regexp.MustCompile(`^\s*(host|hostaddr|port|dbname|user|password|passfile|service|sslmode|` +
	`connect_timeout|application_name|options|target_session_attrs|channel_binding|require_auth|` +
	`sslrootcert|sslcert|sslkey|sslpassword|sslnegotiation|sslsni|krbsrvname|gssencmode)\s*=`)

// CheckDB refuses a --db value that is neither a SQLite file's path nor
// something pgx reads as a PostgreSQL server, without repeating it (it may hold
// a password): a URL of another scheme, a postgres:// URL in capitals, a URL
// whose user or password holds an @ that is not percent-encoded (libpq and
// pgx take the first @ as the end of the password, other URL readers the last:
// the rest of the password would be taken for the host).
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
		if authority, _, _ := strings.Cut(rest, "/"); strings.Count(authority, "@") > 1 {
			return fmt.Errorf("store: --db: the URL's user or password holds an @: percent-encode it as %%40 "+
				"(or give the password in PGPASSWORD or ~/.pgpass): %w", ErrInvalid)
		}
		return nil
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
	cfg, err := pgx.ParseConfig(db)
	if err != nil {
		return nil, fmt.Errorf("store: %s is not a PostgreSQL URL pgx can read: %s: %w", Redacted(db), parseProblem(err), ErrInvalid)
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = defaultConnectTimeout
	}
	cfg.DialFunc = pgDialFunc(cfg.ConnectTimeout)
	return cfg, nil
}

// parseProblem is what pgx found wrong with a connection string, without the
// string, which its message quotes (masked only at its best).
func parseProblem(err error) string {
	var pe *pgconn.ParseConfigError
	if !errors.As(err, &pe) {
		return "unreadable"
	}
	msg := pe.Error()
	if _, after, ok := strings.Cut(msg, "`: "); ok && strings.HasPrefix(msg, "cannot parse `") {
		msg = after
	}
	if pe.ConnString != "" && strings.Contains(msg, pe.ConnString) {
		return "unreadable"
	}
	return msg
}

// Redacted is a --db value as a message or log line may show it: a SQLite path
// as it is, a URL or libpq settings with the password masked.
func Redacted(db string) string {
	switch {
	case keywordDSN.MatchString(db):
		return keywordPassword.ReplaceAllString(db, "${1}xxxxx")
	case strings.Contains(db, "://"):
		return maskURLPassword(db, "xxxxx")
	}
	return db
}

// keywordPassword is a password setting of libpq keyword=value settings (the
// login's, or sslpassword, the client key's): a quoted value (with \' and \\
// inside) or a word.
var keywordPassword = regexp.MustCompile(`(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)`)

// secretParams are the URL query parameters that hold a password.
var secretParams = []string{"password", "sslpassword"}

// maskURLPassword is raw with its password replaced by mask ("" leaves the user
// alone, with no colon): the userinfo's, up to the last @ before the path (so
// the whole of a password with an unencoded @ goes), and a password query
// parameter.
func maskURLPassword(raw, mask string) string {
	scheme, rest, _ := strings.Cut(raw, "://")
	authority, path, hasPath := strings.Cut(rest, "/")
	if at := strings.LastIndex(authority, "@"); at >= 0 {
		userinfo, host := authority[:at], authority[at+1:]
		if user, _, ok := strings.Cut(userinfo, ":"); ok {
			if mask != "" {
				user += ":" + mask
			}
			userinfo = user
		}
		authority = userinfo + "@" + host
	}
	out := scheme + "://" + authority
	if hasPath {
		base, query, hasQuery := strings.Cut(path, "?")
		out += "/" + base
		if hasQuery {
			if q, err := url.ParseQuery(query); err == nil {
				changed := false
				for _, k := range secretParams {
					if !q.Has(k) {
						continue
					}
					if changed = true; mask == "" {
						q.Del(k)
					} else {
						q.Set(k, mask)
					}
				}
				if changed {
					query = q.Encode()
				}
			} else {
				query = queryPassword.ReplaceAllString(query, "${1}"+mask)
			}
			if query != "" {
				out += "?" + query
			}
		}
	}
	return out
}

// queryPassword is a password parameter in a query that does not parse.
var queryPassword = regexp.MustCompile(`((?:^|&)(?:ssl)?password=)[^&]*`)

// Pasteable is a PostgreSQL --db value as a command the user pastes may take it:
// without its password (which masked would not work), quoted for a POSIX shell;
// withoutPassword says one was left out, to be given by PGPASSWORD or ~/.pgpass.
// A SQLite path is quoted only if the shell would split it.
func Pasteable(db string) (arg string, withoutPassword bool) {
	out := db
	switch {
	case keywordDSN.MatchString(db):
		out = strings.TrimSpace(keywordPassword.ReplaceAllString(db, ""))
	case strings.Contains(db, "://"):
		out = maskURLPassword(db, "")
	}
	return shellQuote(out), out != db
}

// shellQuote is s as one word of a POSIX shell.
func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`&;|<>()*?[]{}#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
