package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// operator passwd and operator logout end an operator's sessions; operator list shows them.
func TestAdminPasswdLogoutList(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: about ten bcrypt hashes at the real cost, which the race detector makes half a minute")
	}
	db := filepath.Join(t.TempDir(), "sb.db")
	if code, _, errs := cli(t, "first password\n", "admin", "create", "--username", "ana", "--db", db); code != 0 {
		t.Fatalf("admin create: %d %s", code, errs)
	}
	ctx := context.Background()
	st := openRW(t, db)
	login := func() {
		t.Helper()
		h, err := st.CheckPassword(ctx, "ana", "second password")
		if err != nil {
			h, err = st.CheckPassword(ctx, "ana", "first password")
		}
		if err == nil {
			_, _, err = st.CreateWebSession(ctx, h.ID, time.Hour, "test", "")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	login()
	login()

	code, out, errs := cli(t, "", "admin", "list", "--json", "--db", db)
	var ops []store.OperatorSummary
	if err := json.Unmarshal([]byte(out), &ops); code != 0 || err != nil || len(ops) != 1 || ops[0].Sessions != 2 || ops[0].LastLogin == nil {
		t.Fatalf("admin list: %d %q %q", code, out, errs)
	}
	code, out, errs = cli(t, "second password\n", "admin", "passwd", "--username", "ana", "--db", db)
	if code != 0 || !strings.Contains(out, "sessions ended: 2") {
		t.Fatalf("admin passwd: %d %q %q", code, out, errs)
	}
	_, errOld := st.CheckPassword(ctx, "ana", "first password")
	_, errNew := st.CheckPassword(ctx, "ana", "second password")
	if errOld == nil || errNew != nil {
		t.Fatalf("after passwd: old password %v, new password %v", errOld, errNew)
	}
	login()
	code, out, errs = cli(t, "", "admin", "logout", "--username", "ana", "--db", db)
	if code != 0 || !strings.Contains(out, "sessions ended: 1") {
		t.Fatalf("admin logout: %d %q %q", code, out, errs)
	}
	if code, out, _ := cli(t, "", "admin", "list", "--db", db); code != 0 || !strings.Contains(out, "ana") ||
		!strings.Contains(out, "  0  ") {
		t.Fatalf("admin list after logout: %d %q", code, out)
	}
	// The last login outlives its session: it comes from the audit log.
	code, out, errs = cli(t, "", "admin", "list", "--json", "--db", db)
	var after []store.OperatorSummary
	if err := json.Unmarshal([]byte(out), &after); code != 0 || err != nil || len(after) != 1 || after[0].Sessions != 0 || after[0].LastLogin == nil {
		t.Fatalf("admin list after logout: %d %q %q", code, out, errs)
	}

	for _, c := range []struct {
		stdin string
		args  []string
		code  int
		want  string
	}{
		{"", []string{"admin", "logout", "--username", "bob", "--db", db}, 1, `operator "bob"`},
		{"short\n", []string{"admin", "passwd", "--username", "ana", "--db", db}, 1, "at least 8 characters"},
		{"", []string{"admin", "passwd", "--username", "ana", "--db", db}, 2, "no password on stdin"},
		// echo "$PW" with PW unset pipes a bare newline.
		{"\n", []string{"admin", "passwd", "--username", "ana", "--db", db}, 2, "the password on stdin is empty"},
		{"", []string{"admin", "logout", "--db", db}, 2, "--username is required"},
		{"", []string{"admin", "logout", "--username", "ana", "--db", filepath.Join(t.TempDir(), "typo.db")}, 1, "no database"},
	} {
		if code, _, errs := cli(t, c.stdin, c.args...); code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, %q; want %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
	// The audit log says who did what.
	rows, err := st.ListAudit(ctx, store.AuditFilter{Actor: "human:cli", Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.Action+" "+r.Detail)
	}
	if want := []string{"human.logout_all sessions ended=1", "human.password sessions ended=2"}; len(got) < 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("audit %q, want %q first", got, want)
	}
}

// The board's user is an operator everywhere; `admin`, the command's old name,
// still works for the scripts that call it, with the usage it always printed.
func TestOperatorCommandAndItsOldName(t *testing.T) {
	adminUsage := "usage: switchboard admin create --username NAME [--db FILE]   (password read from stdin)\n" +
		"       switchboard admin passwd --username NAME [--db FILE]   (new password read from stdin; logs NAME out everywhere)\n" +
		"       switchboard admin logout --username NAME [--db FILE]   (ends every session of NAME)\n" +
		"       switchboard admin list [--json] [--db FILE]\n"
	for name, want := range map[string]string{"admin": adminUsage, "operator": strings.ReplaceAll(adminUsage, " admin ", " operator ")} {
		if code, out, errs := cli(t, "", name, "-h"); code != 0 || out != want || errs != "" {
			t.Errorf("%s -h: exit %d\n%s\nwant\n%s(stderr %q)", name, code, out, want, errs)
		}
		code, out, _ := cli(t, "", name, "create", "-h")
		if code != 0 || !strings.HasPrefix(out, strings.SplitAfter(want, "\n")[0]) || !strings.Contains(out, "-username") {
			t.Errorf("%s create -h: exit %d %q", name, code, out)
		}
	}
	db := filepath.Join(t.TempDir(), "sb.db")
	for _, c := range [][]string{{"operator", "ana"}, {"admin", "bob"}} {
		if code, out, errs := cli(t, "a long enough password\n", c[0], "create", "--username", c[1], "--db", db); code != 0 ||
			!strings.HasPrefix(out, `operator "`+c[1]+`" created`) {
			t.Fatalf("%s create: exit %d %q %q", c[0], code, out, errs)
		}
	}
	for _, name := range []string{"operator", "admin"} {
		if code, out, _ := cli(t, "", name, "list", "--db", db); code != 0 || !strings.Contains(out, "ana") || !strings.Contains(out, "bob") {
			t.Errorf("%s list: exit %d %q", name, code, out)
		}
	}
	if code, _, errs := cli(t, "", "admin", "logout", "--db", db); code != 2 || errs != "switchboard admin: --username is required\n" {
		t.Errorf("admin logout without --username: exit %d %q", code, errs)
	}
}
