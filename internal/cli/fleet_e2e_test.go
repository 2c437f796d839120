package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mark3labs/mcp-go/client"
	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/mcpclient"
	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/store"
)

// fleetTodos is how many todos the fleet drains, fleetAgents by how many agents.
const (
	fleetTodos  = 5000
	fleetAgents = 8
)

// TestFleetOfThreeServes runs three serve processes (the built binary) on one
// PostgreSQL database, as a fleet behind a load balancer would: a revoked
// credential is refused by every process within a second; eight agents spread over them
// drain 5,000 todos while the process holding the reaper's role is SIGKILLed
// with leases in hand, and another process takes the role, reaps those leases,
// and the todos are completed, each exactly once; a todo returned to its queue
// through one process rings an agent attached to another.
func TestFleetOfThreeServes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs three servers; skipped with -short")
	}
	db := testkit.PostgresURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	bin := buildSwitchboard(t, ctx)
	st, err := store.Open(ctx, db, store.Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	queues, verbs := []string{"work", "bell"}, store.TodoVerbs()
	_, cred, err := st.CreateEndpoint(ctx, "fleet", store.EndpointSpec{Queues: &queues, Verbs: &verbs}, "system")
	if err != nil {
		t.Fatal(err)
	}
	var procs []*fleetProc
	for range 3 {
		procs = append(procs, startFleetServe(t, ctx, bin, db))
	}

	t.Run("revocation", func(t *testing.T) { checkRevocationAcrossFleet(t, ctx, st, procs) })
	leader := drainAcrossFleet(t, ctx, db, st, cred, procs)
	var alive []*fleetProc
	for i, p := range procs {
		if i != leader {
			alive = append(alive, p)
		}
	}
	t.Run("doorbell", func(t *testing.T) { checkDoorbellAcrossFleet(t, ctx, st, cred, alive[0], alive[1]) })
}

// fleetProc is one serve of the fleet.
type fleetProc struct {
	url    string
	cmd    *exec.Cmd
	killed atomic.Bool
}

// startFleetServe runs serve on db with a one-second reaper interval.
func startFleetServe(t *testing.T, ctx context.Context, bin, db string) *fleetProc {
	t.Helper()
	return startServeBinary(t, ctx, bin, append(os.Environ(), "SWITCHBOARD_DB="+db, "SWITCHBOARD_SECRET_ENCRYPTION_KEY=",
		"SWITCHBOARD_SECRET_KEY_FILE="), "--reaper-interval", "1s")
}

// startServeBinary runs `switchboard serve` on a free loopback port, with env and
// args, and returns once it says it is listening; it is stopped with SIGTERM at
// cleanup, and must exit cleanly unless the test killed it.
func startServeBinary(t *testing.T, ctx context.Context, bin string, env []string, args ...string) *fleetProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, bin, append([]string{"serve", "--listen", "127.0.0.1:0"}, args...)...)
	cmd.Env = env
	stderr := &testkit.LockedBuffer{}
	cmd.Stderr = stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &fleetProc{cmd: cmd}
	exited, addr := make(chan error, 1), make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if _, rest, ok := strings.Cut(sc.Text(), " listening on "); ok {
				u, _, _ := strings.Cut(rest, " ")
				addr <- u
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		if p.killed.Load() {
			<-exited
			return
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if err := <-exited; err != nil {
			t.Errorf("serve exited with %v: %s", err, stderr.String())
		}
	})
	select {
	case p.url = <-addr:
		return p
	case err := <-exited:
		exited <- err
		t.Fatalf("serve exited before listening: %v: %s", err, stderr.String())
	}
	return nil
}

// kill ends the process with SIGKILL: no shutdown, its row and leases left.
func (p *fleetProc) kill(t *testing.T) {
	p.killed.Store(true)
	if err := p.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
}

// fleetLeader waits until a process other than not holds the reaper's role, and
// returns its index in procs.
func fleetLeader(t *testing.T, ctx context.Context, st *store.Store, procs []*fleetProc, not int) int {
	t.Helper()
	for ctx.Err() == nil {
		list, err := st.ListProcesses(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range list {
			i := slices.IndexFunc(procs, func(fp *fleetProc) bool { return fp.cmd.Process.Pid == p.PID })
			if i >= 0 && i != not && slices.Contains(p.Roles, store.RoleReaper) {
				return i
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("no process took the reaper's role before the test's deadline")
	return -1
}

// checkRevocationAcrossFleet: an endpoint revoked (here by another process, as the
// CLI or the board of any serve does) is refused by every process within a
// second (their foreign-commit watches see it; see store.credWatchFresh): its
// live sessions' calls, and a new session. The wait is bounded far above that,
// as a liveness check.
func checkRevocationAcrossFleet(t *testing.T, ctx context.Context, st *store.Store, procs []*fleetProc) {
	ep, cred, err := st.CreateEndpoint(ctx, "doomed", store.EndpointSpec{}, "system")
	if err != nil {
		t.Fatal(err)
	}
	var sessions []*client.Client
	for _, p := range procs {
		c := dialFleet(t, ctx, p, cred, nil)
		if _, err := c.ListTools(ctx, mcp.ListToolsRequest{}); err != nil {
			t.Fatalf("before the revocation, %s: %v", p.url, err)
		}
		sessions = append(sessions, c)
	}
	if err := st.RevokeEndpoint(ctx, ep.ID, "human:test"); err != nil {
		t.Fatal(err)
	}
	for i, p := range procs {
		refused := func() bool {
			_, err := sessions[i].ListTools(ctx, mcp.ListToolsRequest{})
			return err != nil && initializeStatus(t, ctx, p.url, cred) == http.StatusUnauthorized
		}
		for deadline := time.Now().Add(10 * time.Second); !refused(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%s still answers a revoked endpoint 10 s after its revocation", p.url)
			}
		}
	}
}

// initializeStatus is the HTTP status of a new session's initialize on url with cred.
func initializeStatus(t *testing.T, ctx context.Context, url, cred string) int {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Header.Set("Authorization", "Bearer "+cred)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// dialFleet opens an MCP session on p; with notes, its GET stream too.
func dialFleet(t *testing.T, ctx context.Context, p *fleetProc, cred string, notes chan<- mcp.JSONRPCNotification) *client.Client {
	t.Helper()
	o := mcpclient.DialOptions{Logger: quietLogger()}
	if notes != nil {
		o.Listen, o.OnNotification = true, func(n mcp.JSONRPCNotification) {
			select {
			case notes <- n:
			default:
			}
		}
	}
	c, _, err := mcpclient.Dial(ctx, p.url+"/mcp", cred, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// fleetCall calls a tool and decodes its structured result into out; a tool
// error is an error.
func fleetCall(ctx context.Context, c *client.Client, tool string, args map[string]any, out any) error {
	res, err := c.CallTool(ctx, mcp.CallToolRequest{Params: mcp.CallToolParams{Name: tool, Arguments: args}})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("%s: %v", tool, res.Content)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

type fleetClaim struct {
	Claimed bool `json:"claimed"`
	Todo    struct {
		ID int64 `json:"id"`
	} `json:"todo"`
	LeaseSeq int64 `json:"lease_seq"`
}

// fleetTally is what the agents of the drain did.
type fleetTally struct {
	mu        sync.Mutex
	completed map[int64]int // successful completes per todo
	lost      []int64       // todos whose complete got no answer: their process died
	done      atomic.Int64
	errors    atomic.Int64 // calls that failed and were made again
}

// drainAcrossFleet has eight agents, spread over the processes, drain the work
// queue; mid-drain the leader process is SIGKILLed while holding leases that no
// one completes. Every todo is then done, completed once, and those leases were
// reaped by the process that took the role over. It returns the killed one.
func drainAcrossFleet(t *testing.T, ctx context.Context, db string, st *store.Store, cred string, procs []*fleetProc) (leader int) {
	for i := 0; i < fleetTodos; i += 500 {
		var wg sync.WaitGroup
		for j := i; j < min(i+500, fleetTodos); j++ {
			wg.Go(func() {
				if _, err := st.AddTodo(ctx, store.NewTodo{Queue: "work", Payload: strconv.Itoa(j)}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
	}
	// A session on each process, to take leases on the leader and never complete them.
	var held []*client.Client
	for _, p := range procs {
		held = append(held, dialFleet(t, ctx, p, cred, nil))
	}
	tally := &fleetTally{completed: map[int64]int{}}
	var finished atomic.Bool
	var wg sync.WaitGroup
	start := time.Now()
	for i := range fleetAgents {
		p := procs[i%len(procs)]
		c := dialFleet(t, ctx, p, cred, nil)
		wg.Go(func() { fleetAgent(ctx, p, c, tally, &finished) })
	}
	for tally.done.Load() < fleetTodos/3 && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	// The role may have moved since the start: the one holding it now is killed,
	// with leases in hand that its death must not lose.
	leader = fleetLeader(t, ctx, st, procs, -1)
	var stuck []int64
	for range 3 {
		var cl fleetClaim
		if err := fleetCall(ctx, held[leader], "claim_next", map[string]any{"queue": "work", "lease_ttl_seconds": 3}, &cl); err != nil || !cl.Claimed {
			t.Fatalf("claim on the leader: %v %+v", err, cl)
		}
		stuck = append(stuck, cl.Todo.ID)
	}
	procs[leader].kill(t)
	killed := time.Now()
	next := fleetLeader(t, ctx, st, procs, leader)
	takeover := time.Since(killed)
	waitDrained(t, ctx, st)
	took := time.Since(start)
	counts := todoStates(t, ctx, db)
	finished.Store(true)
	wg.Wait()

	if counts["done"] != fleetTodos || len(counts) != 1 {
		t.Fatalf("the work queue holds %v, want %d done", counts, fleetTodos)
	}
	for id, n := range tally.completed {
		if n != 1 {
			t.Errorf("todo %d completed %d times", id, n)
		}
	}
	if missing := fleetTodos - len(tally.completed); missing > len(tally.lost) {
		t.Errorf("%d todos were never completed by an agent, %d completes got no answer", missing, len(tally.lost))
	}
	for _, id := range stuck {
		if tally.completed[id] != 1 {
			t.Errorf("todo %d, leased on the killed leader, completed %d times, want once by another process's agent", id, tally.completed[id])
		}
	}
	var requeued int
	if err := pgxQueryRow(ctx, db, `SELECT count(*) FROM audit WHERE action = 'todo.requeue' AND target = ANY($1)`,
		[]any{todoTargets(stuck)}, &requeued); err != nil || requeued != len(stuck) {
		t.Errorf("the leases held on the killed leader were requeued %d times (%v), want %d", requeued, err, len(stuck))
	}
	t.Logf("process %d held the reaper's role and was killed after %d completes; process %d took it over %s later; drained in %s; %d calls failed and were made again",
		leader, fleetTodos/3, next, takeover.Round(time.Millisecond), took.Round(time.Millisecond), tally.errors.Load())
	return leader
}

// fleetAgent claims and completes until finished, as an agent would: a call that
// fails while its process lives is made again (PostgreSQL may end a transaction
// as a deadlock's victim); it stops when its process is killed.
func fleetAgent(ctx context.Context, p *fleetProc, c *client.Client, tally *fleetTally, finished *atomic.Bool) {
	for !finished.Load() && ctx.Err() == nil && !p.killed.Load() {
		var cl fleetClaim
		if err := fleetCall(ctx, c, "claim_next", map[string]any{"queue": "work", "lease_ttl_seconds": 10}, &cl); err != nil {
			tally.errors.Add(1)
			continue
		}
		if !cl.Claimed {
			time.Sleep(20 * time.Millisecond)
			continue
		}
		var err error
		for range 5 {
			var out map[string]any
			if err = fleetCall(ctx, c, "complete", map[string]any{"todo_id": cl.Todo.ID, "lease_seq": cl.LeaseSeq}, &out); err == nil || p.killed.Load() {
				break
			}
			tally.errors.Add(1)
		}
		tally.mu.Lock()
		if err != nil {
			tally.lost = append(tally.lost, cl.Todo.ID)
		} else {
			tally.completed[cl.Todo.ID]++
		}
		tally.mu.Unlock()
		tally.done.Add(1)
	}
}

// waitDrained waits until no todo of the work queue is pending or claimed.
func waitDrained(t *testing.T, ctx context.Context, st *store.Store) {
	t.Helper()
	for {
		counts, err := st.QueueCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		left := slices.ContainsFunc(counts, func(c store.QueueCount) bool {
			return c.Queue == "work" && (c.State == store.StatePending || c.State == store.StateClaimed) && c.Count > 0
		})
		if !left {
			return
		}
		if ctx.Err() != nil {
			t.Fatalf("the fleet did not drain the queue before the test's deadline: %+v", counts)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// todoStates counts the work queue's todos by state, from the rows themselves.
func todoStates(t *testing.T, ctx context.Context, db string) map[string]int {
	t.Helper()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT state, count(*) FROM todos WHERE queue = 'work' GROUP BY state`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	counts := map[string]int{}
	for rows.Next() {
		var state string
		var n int
		if err := rows.Scan(&state, &n); err != nil {
			t.Fatal(err)
		}
		counts[state] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return counts
}

// pgxQueryRow runs one query on its own connection and scans its one row.
func pgxQueryRow(ctx context.Context, db, query string, args []any, dest ...any) error {
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, query, args...).Scan(dest...)
}

func todoTargets(ids []int64) []string {
	var out []string
	for _, id := range ids {
		out = append(out, "todo:"+strconv.FormatInt(id, 10))
	}
	return out
}

// checkDoorbellAcrossFleet: a todo released through process a rings an agent
// listening on process b.
func checkDoorbellAcrossFleet(t *testing.T, ctx context.Context, st *store.Store, cred string, a, b *fleetProc) {
	notes := make(chan mcp.JSONRPCNotification, 64)
	dialFleet(t, ctx, b, cred, notes)
	worker := dialFleet(t, ctx, a, cred, nil)
	td, err := st.AddTodo(ctx, store.NewTodo{Queue: "bell", Payload: "ring"})
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("todo %d ready on queue bell", td.ID)
	waitRing(t, ctx, notes, want) // the add, from outside the fleet
	var cl fleetClaim
	if err := fleetCall(ctx, worker, "claim_next", map[string]any{"queue": "bell"}, &cl); err != nil || cl.Todo.ID != td.ID {
		t.Fatalf("claim on %s: %v %+v", a.url, err, cl)
	}
	var out map[string]any
	if err := fleetCall(ctx, worker, "release", map[string]any{"todo_id": td.ID, "lease_seq": cl.LeaseSeq}, &out); err != nil {
		t.Fatal(err)
	}
	waitRing(t, ctx, notes, want)
}

// waitRing waits for a doorbell whose content is want.
func waitRing(t *testing.T, ctx context.Context, notes <-chan mcp.JSONRPCNotification, want string) {
	t.Helper()
	for {
		select {
		case n := <-notes:
			if b, _ := json.Marshal(n.Params); n.Method == agent.ChannelMethod && bytes.Contains(b, []byte(want)) {
				return
			}
		case <-ctx.Done():
			t.Fatalf("no doorbell %q before the test's deadline", want)
		}
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// buildSwitchboard builds the binary into the test's temporary directory.
func buildSwitchboard(t *testing.T, ctx context.Context) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "switchboard")
	build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/switchboardhq/switchboard")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}
