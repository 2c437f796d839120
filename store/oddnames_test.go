package store

import (
	"context"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboardhq/switchboard/internal/testkit"
)

// Refusals and advice whose statements and commands hold names: odd names do
// not change what they do. And a worker's reservations, many of them.

func superuserConn(t *testing.T) (*pgx.Conn, string) {
	t.Helper()
	base := os.Getenv("SWITCHBOARD_TEST_POSTGRES")
	if base == "" {
		testkit.SkipOrFail(t, "SWITCHBOARD_TEST_POSTGRES names no PostgreSQL server (see docs/development.md)")
		return nil, ""
	}
	admin, err := pgx.Connect(context.Background(), base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close(context.Background()) })
	return admin, base
}

func roleURL(t *testing.T, base, user, searchPath string) string {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(user)
	q := u.Query()
	q.Set("search_path", searchPath)
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // pgx, as libpq, reads + as itself
	return u.String()
}

// giveStatement is the DO statement notOwner's refusal gives, whole: from DO
// and its dollar quote to END and the same quote.
func giveStatement(t *testing.T, msg string) string {
	t.Helper()
	_, rest, ok := strings.Cut(msg, "DO $switchboard")
	end := strings.Index(rest, "$")
	if !ok || end < 0 {
		t.Fatalf("the refusal gives no DO statement: %s", msg)
	}
	tag := "$switchboard" + rest[:end+1]
	j := strings.LastIndex(msg, "END"+tag)
	i := strings.Index(msg, "DO "+tag)
	if j < i {
		t.Fatalf("the refusal's DO statement does not end: %s", msg)
	}
	stmt := msg[i : j+len("END"+tag)]
	if n := strings.Count(stmt, tag); n != 2 {
		t.Errorf("the DO statement holds its quote %s %d times, not 2: %s", tag, n, stmt)
	}
	return stmt
}

func quietOptions() Options { return Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))} }

// notOwner's DO statement is dollar-quoted, and the names it holds as literals
// may hold its quote: a role named with "$switchboard$" in it must not end the
// body early, or what follows would run as SQL of its own when a superuser
// pastes the statement into psql, as advised.
func TestGiveTablesStatementHoldsNamesWithItsQuote(t *testing.T) {
	admin, base := superuserConn(t)
	ctx := context.Background()
	evil := `gt$switchboard$; CREATE TABLE public.gt_pwned (); --`
	cleanup := func() {
		admin.Exec(ctx, `DROP SCHEMA IF EXISTS gt_s CASCADE`)
		admin.Exec(ctx, `DROP TABLE IF EXISTS public.gt_pwned`)
		admin.Exec(ctx, `DROP ROLE IF EXISTS `+pgx.Identifier{evil}.Sanitize())
		admin.Exec(ctx, `DROP ROLE IF EXISTS gt_visitor`)
	}
	cleanup()
	t.Cleanup(cleanup)
	for _, q := range []string{
		`CREATE ROLE ` + pgx.Identifier{evil}.Sanitize() + ` LOGIN`,
		`CREATE ROLE gt_visitor LOGIN`,
		`CREATE SCHEMA gt_s`,
		`GRANT USAGE, CREATE ON SCHEMA gt_s TO ` + pgx.Identifier{evil}.Sanitize() + `, gt_visitor`,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The tables, made by the role with the odd name.
	s, err := Open(ctx, roleURL(t, base, evil, "gt_s"), quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(ctx, roleURL(t, base, "gt_visitor", "gt_s"), quietOptions())
	if err == nil {
		t.Fatal("gt_visitor opened tables another role made")
	}
	stmt := giveStatement(t, err.Error())
	psql, lerr := exec.LookPath("psql")
	if lerr != nil {
		return
	}
	cmd := exec.Command(psql, "-X", "-q", "-f", "-", base)
	cmd.Stdin = strings.NewReader(stmt + "\n")
	out, _ := cmd.CombinedOutput()
	var injected bool
	if err := admin.QueryRow(ctx, `SELECT to_regclass('public.gt_pwned') IS NOT NULL`).Scan(&injected); err != nil {
		t.Fatal(err)
	}
	if injected {
		t.Errorf("pasted into psql as the superuser, the advised statement ran SQL from a role's name "+
			"(public.gt_pwned now exists); psql said:\n%s", out)
	}
}

// The statement is a superuser's to run: the tables' maker may give them only
// to a role it is a member of. The refusal says so, and the statement, run as
// a superuser, gives a maker's tables to the role that was refused.
func TestGiveTablesStatementFromAnotherMaker(t *testing.T) {
	admin, base := superuserConn(t)
	ctx := context.Background()
	cleanup := func() {
		admin.Exec(ctx, `DROP SCHEMA IF EXISTS gt_s2 CASCADE`)
		admin.Exec(ctx, `DROP ROLE IF EXISTS gt_maker`)
		admin.Exec(ctx, `DROP ROLE IF EXISTS gt_visitor2`)
	}
	cleanup()
	t.Cleanup(cleanup)
	for _, q := range []string{`CREATE ROLE gt_maker LOGIN`, `CREATE ROLE gt_visitor2 LOGIN`, `CREATE SCHEMA gt_s2`,
		`GRANT USAGE, CREATE ON SCHEMA gt_s2 TO gt_maker, gt_visitor2`} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	s, err := Open(ctx, roleURL(t, base, "gt_maker", "gt_s2"), quietOptions())
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(ctx, roleURL(t, base, "gt_visitor2", "gt_s2"), quietOptions())
	if err == nil {
		t.Fatal("gt_visitor2 opened tables another role made")
	}
	if !strings.Contains(err.Error(), `the role "gt_maker" made them`) || !strings.Contains(err.Error(), "as a superuser:") {
		t.Fatalf("the refusal: %v", err)
	}
	if _, err := admin.Exec(ctx, giveStatement(t, err.Error())); err != nil {
		t.Fatal(err)
	}
	if s, err := Open(ctx, roleURL(t, base, "gt_visitor2", "gt_s2"), quietOptions()); err != nil {
		t.Errorf("after the statement: %v", err)
	} else {
		s.Close()
	}
}

// pg_restore --list writes a schema's name as it is, spaces and all: an
// archive of the very schema --db names, with a space in its name, is that
// schema's, not one named by its first word.
func TestRestoreAdviceOnASchemaWithASpace(t *testing.T) {
	admin, base := superuserConn(t)
	if _, err := exec.LookPath("pg_dump"); err != nil {
		testkit.SkipOrFail(t, "no pg_dump on PATH: the archive not made")
		return
	}
	ctx := context.Background()
	cleanup := func() { admin.Exec(ctx, `DROP SCHEMA IF EXISTS "gt my app" CASCADE`) }
	cleanup()
	t.Cleanup(cleanup)
	if _, err := admin.Exec(ctx, `CREATE SCHEMA "gt my app"; CREATE TABLE "gt my app".todos (id bigint)`); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "switchboard.dump")
	if out, err := exec.Command("pg_dump", "--format=custom", "--file="+archive, `--schema="gt my app"`, base).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, out)
	}
	db := roleURL(t, base, "postgres", `"gt my app"`)
	err := PgDumpAdvice("restore", db, archive)
	if err == nil {
		t.Fatal("no advice")
	}
	t.Logf("advice:\n%s", err)
	if strings.Contains(err.Error(), "The archive's tables are in the schema") {
		t.Errorf("the archive is of the schema --db names (gt my app), yet the advice says it is of another")
	}
	if cmd, _ := AdviceCommand(err.Error()); !strings.Contains(cmd, `--schema='gt my app'`) {
		t.Errorf("the command restores another schema: %s", cmd)
	}
}

// The claim gate finds a worker's reservation on an asked queue behind any
// number of older ones on other queues (decisions within ApprovalHold).
func TestAReservationAfterAHundredOthersIsSeen(t *testing.T) {
	clock := testkit.NewClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	s := openTest(t, Options{Now: clock.Now})
	ctx := context.Background()
	ask := func(id int64) { approved(t, s, id, "agent:w") }
	for _, id := range addTodos(t, s, "qa", 100) {
		ask(id)
	}
	b := addTodos(t, s, "qb", 1)[0]
	ask(b)
	td, ok, err := s.ClaimNext(ctx, "agent:w", []string{"qb", "qc"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !ok || td.ID != b {
		t.Errorf("agent:w's claim on qb, qc = %d (ok %v); want todo %d, answered and reserved for it on qb", td.ID, ok, b)
	}
}

// pg_restore --list: an archive of the schema "gtx app", restored for a --db
// whose schema is gtx, is not the --db's schema's: the command restores
// "gtx app".
func TestRestoreAdviceSchemaNamedLikeTheFirstWord(t *testing.T) {
	admin, base := superuserConn(t)
	if _, err := exec.LookPath("pg_dump"); err != nil {
		testkit.SkipOrFail(t, "no pg_dump on PATH: the archive not made")
		return
	}
	ctx := context.Background()
	cleanup := func() { admin.Exec(ctx, `DROP SCHEMA IF EXISTS "gtx app" CASCADE; DROP SCHEMA IF EXISTS gtx CASCADE`) }
	cleanup()
	t.Cleanup(cleanup)
	if _, err := admin.Exec(ctx, `CREATE SCHEMA gtx; CREATE SCHEMA "gtx app"; CREATE TABLE "gtx app".todos (id bigint)`); err != nil {
		t.Fatal(err)
	}
	archive := filepath.Join(t.TempDir(), "switchboard.dump")
	if out, err := exec.Command("pg_dump", "--format=custom", "--file="+archive, `--schema="gtx app"`, base).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, out)
	}
	err := PgDumpAdvice("restore", roleURL(t, base, "postgres", "gtx"), archive)
	t.Logf("advice:\n%s", err)
	if cmd, _ := AdviceCommand(err.Error()); !strings.Contains(cmd, `--schema='gtx app'`) {
		t.Errorf("the archive's tables are in \"gtx app\", the command restores only gtx (nothing): %s", cmd)
	}
}
