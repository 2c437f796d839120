package testkit

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// Cluster is a PostgreSQL server of one test's own, for tests that stop and
// start it or need password authentication: its superuser postgres signs in with
// Password over TCP on loopback. It is stopped and removed when the test ends.
type Cluster struct {
	t        testing.TB
	bin, dir string
	Port     int
	Password string
	running  bool
}

// StartCluster creates a cluster with initdb and starts it with pg_ctl, as the
// postgres user when the test runs as root (PostgreSQL refuses to run as root).
// Without PostgreSQL's binaries the test skips (fails under
// SWITCHBOARD_REQUIRE_EXTERNAL=1).
func StartCluster(t testing.TB) *Cluster {
	t.Helper()
	bins, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(bins) == 0 {
		SkipOrFail(t, "PostgreSQL's initdb is not installed (apt-get install postgresql)")
		return nil
	}
	sort.Strings(bins)
	dir, err := os.MkdirTemp("", "switchboard-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	var b [8]byte
	rand.Read(b[:])
	c := &Cluster{t: t, bin: filepath.Dir(bins[len(bins)-1]), dir: dir, Password: "pw-" + hex.EncodeToString(b[:])}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pw"), []byte(c.Password+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if os.Getuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			SkipOrFail(t, "running as root and there is no postgres user to run PostgreSQL as")
			return nil
		}
		uid, _ := strconv.Atoi(u.Uid)
		if err := os.Chown(dir, uid, -1); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c.Port = ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	c.run("initdb", "-D", c.data(), "-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256",
		"--pwfile="+filepath.Join(dir, "pw"), "-E", "UTF8")
	c.Start()
	t.Cleanup(c.Stop)
	return c
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// URL is the URL of database db on the cluster as user with password.
func (c *Cluster) URL(usr, password, db string) string {
	u := url.URL{Scheme: "postgres", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(c.Port)), Path: "/" + db}
	u.User = url.UserPassword(usr, password)
	return u.String()
}

// Start starts the cluster and waits until it takes connections.
func (c *Cluster) Start() {
	c.t.Helper()
	c.run("pg_ctl", "-D", c.data(), "-o", fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.Port, c.dir),
		"-l", filepath.Join(c.dir, "pg.log"), "-w", "start")
	c.running = true
}

// Stop stops the cluster at once (pg_ctl's fast mode: sessions are ended).
func (c *Cluster) Stop() {
	c.t.Helper()
	if c.running {
		c.run("pg_ctl", "-D", c.data(), "-m", "fast", "-w", "stop")
		c.running = false
	}
}

// run runs one of PostgreSQL's programs, as the postgres user when root.
func (c *Cluster) run(prog string, args ...string) {
	c.t.Helper()
	argv := append([]string{filepath.Join(c.bin, prog)}, args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	if os.Getuid() == 0 {
		quoted := make([]string, len(argv))
		for i, a := range argv {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		cmd = exec.Command("su", "postgres", "-s", "/bin/sh", "-c", strings.Join(quoted, " "))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		c.t.Fatalf("%s: %v\n%s", prog, err, out)
	}
}
