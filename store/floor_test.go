package store

import (
	"context"
	"database/sql"
	"net/url"
	"strings"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// On PostgreSQL the floor is the server's durable one-row commits, measured in a
// table of its own that is gone afterwards: the run leaves the schema as it found it.
func TestMeasureFloorOnPostgres(t *testing.T) {
	dbURL := testkit.PostgresURL(t)
	ctx := context.Background()
	rate, err := MeasureFloor(ctx, dbURL, Options{}, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if rate <= 0 {
		t.Fatalf("floor %.1f commits/s, want a positive rate", rate)
	}
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var left int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = current_schema() AND table_name LIKE 'switchboard_floor_%'`).Scan(&left); err != nil {
		t.Fatal(err)
	}
	if left != 0 {
		t.Fatalf("%d floor tables left in the schema after the run", left)
	}
}

// A floor on a database that is not there fails in one line that names the server
// but never the password.
func TestMeasureFloorOnPostgresBadDatabase(t *testing.T) {
	u, err := url.Parse(testkit.PostgresURL(t))
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "s3cret-floor")
	u.Path = "/no_such_database_for_the_floor"
	_, err = MeasureFloor(context.Background(), u.String(), Options{}, 100*time.Millisecond)
	if err == nil {
		t.Fatal("measured a floor on a database that does not exist")
	}
	if msg := err.Error(); strings.Contains(msg, "s3cret-floor") || strings.Contains(msg, "\n") ||
		!strings.Contains(msg, "no_such_database_for_the_floor") {
		t.Fatalf("error %q: want one line naming the database, without the password", msg)
	}
}
