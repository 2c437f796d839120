package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/switchboardhq/switchboard/store"
)

const backupSynopsis = `backup --to FILE [--db FILE]     (safe while serve runs)`
const restoreSynopsis = `restore --from FILE [--db FILE]  (refused while serve runs; a SQLite FILE into PostgreSQL: copied in)`

// runBackup writes a consistent copy of a live database: VACUUM INTO reads one
// snapshot while serve goes on committing.
func runBackup(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "backup", backupSynopsis)
	db := dbFlag(fs, env)
	to := fs.String("to", "", "where to write the backup (must not exist)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if store.IsPostgres(*db) {
		return store.PgDumpAdvice("backup", *db, *to) // writing --to, if given
	}
	if *to == "" {
		return usageErr("--to is required")
	}
	// A database not yet migrated (before an upgrade's first serve) is backed
	// up as it is: that copy is the way back to the Switchboard it came from.
	s, err := openStoreROWith(ctx, env, *db, store.Options{OlderSchema: true})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := s.Backup(ctx, *to); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "backed up %s to %s\n", *db, *to)
	return nil
}

// runRestore replaces the database with a backup, after checking the backup is an
// intact Switchboard database. Stop serve first.
func runRestore(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "restore", restoreSynopsis)
	db := dbFlag(fs, env)
	from := fs.String("from", "", "the backup to restore")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if store.IsPostgres(*db) {
		if *from != "" {
			if _, err := os.Stat(*from); errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("no file at %s: give pg_dump's archive, or a SQLite database to copy into PostgreSQL: %w", *from, os.ErrNotExist)
			} else if err != nil {
				return fmt.Errorf("read --from: %w", err)
			}
			if store.IsSQLiteFile(*from) {
				return copyToPostgres(ctx, env, *from, *db)
			}
		}
		return store.PgDumpAdvice("restore", *db, *from)
	}
	if *from == "" {
		return usageErr("--from is required")
	}
	kept, err := store.Restore(ctx, *from, *db)
	if err != nil {
		if errors.Is(err, store.ErrInUse) {
			return fmt.Errorf("%s is in use by a running serve: stop it first (systemctl stop switchboard)", *db)
		}
		return err
	}
	// The full path: a restore run from the wrong directory writes a new database
	// there, and this line is where that shows.
	fmt.Fprintf(env.stdout, "restored %s from %s\n", absPath(*db), *from)
	if kept != "" {
		fmt.Fprintf(env.stdout, "the database it replaced is kept as %s (with anything written since the backup); delete it once you no longer need it\n", absPath(kept))
	}
	return nil
}

// copyToPostgres is restore on PostgreSQL from a SQLite database: the move to
// PostgreSQL. Every row is copied into the empty schema --db names, or none.
func copyToPostgres(ctx context.Context, env *environ, from, db string) error {
	report, err := store.CopyToPostgres(ctx, from, db, "")
	if err != nil {
		return err
	}
	var total int64
	var counts []string
	for _, t := range report.Tables {
		total += t.Rows
		if t.Rows > 0 {
			counts = append(counts, fmt.Sprintf("%s %d", t.Name, t.Rows))
		}
	}
	fmt.Fprintf(env.stdout, "copied %s into %s: %d rows (%s)\n", from, store.Redacted(db), total, strings.Join(counts, ", "))
	if report.Sealed {
		fmt.Fprintln(env.stdout, "its webhook secrets are encrypted: give serve the key that encrypted them "+
			"(SWITCHBOARD_SECRET_ENCRYPTION_KEY or --secret-key-file)")
	}
	fmt.Fprintln(env.stdout, "start serve with this --db; agents keep their credentials, webhooks their URLs")
	return nil
}
