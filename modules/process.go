package modules

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"
)

// Exit describes how a module process ended.
type Exit struct {
	// Code is the exit status, or -1 when a signal ended the process.
	Code int `json:"code"`
	// Signal names the signal that ended the process ("SIGKILL"), if any.
	Signal string    `json:"signal,omitempty"`
	Time   time.Time `json:"time"`
}

func (e Exit) String() string {
	if e.Signal != "" {
		return "killed by " + e.Signal
	}
	return fmt.Sprintf("exited with code %d", e.Code)
}

const (
	// maxStderrLine bounds one logged stderr line; the rest of an overlong
	// line is dropped so a module cannot make the gateway buffer without end.
	maxStderrLine = 4096
	// stderrDrain bounds how long a dead module's last stderr lines are
	// awaited before the pipe is closed regardless (a process that left the
	// group could hold it open forever).
	stderrDrain = time.Second
)

// process is one running module: the child is the leader of its own process
// group, so signals reach everything it started. Switchboard owns all three
// pipes; stdout and stdin are handed to the MCP transport.
type process struct {
	cmd    *exec.Cmd
	pid    int
	stdin  *os.File // write end: the module's stdin
	stdout *os.File // read end: the module's stdout (MCP)
	stderr *os.File // read end: the module's stderr (logs)

	done       chan struct{} // closed once the process is reaped and its group killed
	exit       Exit          // valid after done
	stderrDone chan struct{} // closed when the stderr reader has seen EOF
	closeOnce  sync.Once
}

// startProcess starts the module with exactly env, no shell, in the
// executable's directory and in a new process group.
func startProcess(m Manifest, env []string, log *slog.Logger, ring *lineRing, now func() time.Time) (*process, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("modules: %s: stdin pipe: %w", m.Name, err)
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW)
		return nil, fmt.Errorf("modules: %s: stdout pipe: %w", m.Name, err)
	}
	errR, errW, err := os.Pipe()
	if err != nil {
		closeAll(inR, inW, outR, outW)
		return nil, fmt.Errorf("modules: %s: stderr pipe: %w", m.Name, err)
	}
	cmd := &exec.Cmd{
		Path:   m.Command,
		Args:   append([]string{m.Command}, m.Arguments...),
		Env:    env,
		Dir:    filepath.Dir(m.Command),
		Stdin:  inR,
		Stdout: outW,
		Stderr: errW,
		// Setpgid makes the module a group leader, so shutdown and crash
		// clean-up can signal the whole group and leave no grandchild.
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	startErr := cmd.Start()
	// The child holds its own copies; the parent keeps only its ends, so EOF
	// on stdout/stderr means every process of the module has let go.
	closeAll(inR, outW, errW)
	if startErr != nil {
		closeAll(inW, outR, errR)
		return nil, fmt.Errorf("modules: %s: start %s: %w", m.Name, m.Command, startErr)
	}
	p := &process{
		cmd: cmd, pid: cmd.Process.Pid,
		stdin: inW, stdout: outR, stderr: errR,
		done: make(chan struct{}), stderrDone: make(chan struct{}),
	}
	go p.readStderr(log, ring)
	go p.wait(now)
	return p, nil
}

// wait detects the exit without reaping first (WNOWAIT), so the pid, and
// with it the process-group id, cannot be reused while the rest of the group
// is killed; only then is the child reaped.
func (p *process) wait(now func() time.Time) {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	_ = unix.Kill(-p.pid, unix.SIGKILL) // orphans of a dead module die with it
	_ = p.cmd.Wait()
	p.exit = exitOf(p.cmd.ProcessState, now())
	close(p.done)
}

func exitOf(ps *os.ProcessState, t time.Time) Exit {
	e := Exit{Code: -1, Time: t}
	if ps == nil {
		return e
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = unix.SignalName(ws.Signal())
		return e
	}
	e.Code = ps.ExitCode()
	return e
}

// readStderr logs the module's stderr line by line, tagged by the caller's
// logger, and keeps the last lines for status.
func (p *process) readStderr(log *slog.Logger, ring *lineRing) {
	p.readStderrFlushing(log, ring, stderrCountAfter)
}

// readStderrFlushing is readStderr with the wait before a count of suppressed
// lines is logged (tests shorten it).
func (p *process) readStderrFlushing(log *slog.Logger, ring *lineRing, countAfter time.Duration) {
	defer close(p.stderrDone)
	r := bufio.NewReaderSize(p.stderr, maxStderrLine)
	// Every line is kept in the ring (status shows the last ones); the journal
	// gets them at a bounded rate, so a chatty or hostile module cannot flood it.
	// Lines over the rate are counted, and the count is logged countAfter after
	// the first of them (so at most one count line per countAfter), and at the end.
	lim := rate.NewLimiter(stderrLogRate, stderrLogBurst)
	var (
		mu         sync.Mutex
		suppressed int64
		timer      *time.Timer
		done       bool
	)
	flush := func() { // under mu
		if suppressed > 0 {
			log.Warn("module stderr lines not logged (over the rate)", "lines", suppressed)
			suppressed = 0
		}
		timer = nil
	}
	defer func() {
		mu.Lock()
		defer mu.Unlock()
		if timer != nil {
			timer.Stop()
		}
		flush()
		done = true // a timer already firing logs nothing after this
	}()
	for {
		line, err := readBoundedLine(r, maxStderrLine)
		if len(line) > 0 {
			ring.add(line)
			if lim.Allow() {
				log.Info("module stderr", "line", line)
			} else {
				mu.Lock()
				suppressed++
				if timer == nil {
					timer = time.AfterFunc(countAfter, func() {
						mu.Lock()
						defer mu.Unlock()
						if !done {
							flush()
						}
					})
				}
				mu.Unlock()
			}
		}
		if err != nil {
			return
		}
	}
}

// stderrCountAfter is how long after the first stderr line over the rate the
// count of such lines is logged.
const stderrCountAfter = 5 * time.Second

// stderrLogRate and stderrLogBurst bound how many of a module's stderr lines
// reach the log.
const (
	stderrLogRate  = 20
	stderrLogBurst = 200
)

// readBoundedLine returns the next line without its newline, cut to max
// bytes; the remainder of a longer line is read and discarded.
func readBoundedLine(r *bufio.Reader, max int) (string, error) {
	var buf []byte
	total := 0
	for {
		chunk, err := r.ReadSlice('\n')
		total += len(chunk)
		if room := max - len(buf); room > 0 {
			buf = append(buf, chunk[:min(len(chunk), room)]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		total -= len(chunk) - len(trimEOL(chunk))
		s := string(trimEOL(buf))
		if total > max {
			s += " …[truncated]"
		}
		return s, err
	}
}

func trimEOL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// kill ends the module's whole process group at once.
func (p *process) kill() { _ = unix.Kill(-p.pid, unix.SIGKILL) }

// guardedStdin is the module's stdin as the MCP transport writes it. mcp-go's
// stdio transport writes under one lock and ignores the request's context, so a
// module that stops reading would hold that write, every request queued behind
// it, and the supervisor's own re-list, forever. Each write here has a deadline;
// one that passes kills the module (onStall), after which every write fails at
// once and the supervisor restarts it.
type guardedStdin struct {
	f       *os.File
	stall   time.Duration
	onStall func()
	killed  atomic.Bool
}

func (g *guardedStdin) Write(b []byte) (int, error) {
	if g.killed.Load() {
		// Answers still queued for the module we killed (mcp-go answers each of
		// its requests on its own goroutine) go nowhere, quietly, instead of
		// each logging a write error.
		return len(b), nil
	}
	_ = g.f.SetWriteDeadline(time.Now().Add(g.stall))
	n, err := g.f.Write(b)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		g.killed.Store(true)
		g.onStall()
	}
	return n, err
}

func (g *guardedStdin) Close() error { return g.f.Close() }

// stop ends the module in the order the contract promises: close stdin and
// wait, then SIGTERM the process group and wait, then SIGKILL the group. A
// done ctx skips the polite steps.
func (p *process) stop(ctx context.Context, grace time.Duration) {
	_ = p.stdin.Close()
	if p.exited(ctx, grace) {
		return
	}
	_ = unix.Kill(-p.pid, unix.SIGTERM)
	if p.exited(ctx, grace) {
		return
	}
	_ = unix.Kill(-p.pid, unix.SIGKILL)
	<-p.done
}

func (p *process) exited(ctx context.Context, grace time.Duration) bool {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// release closes the parent's pipe ends once the process is gone, after
// giving the stderr reader a bounded moment to collect the last lines.
func (p *process) release() {
	p.closeOnce.Do(func() {
		t := time.NewTimer(stderrDrain)
		defer t.Stop()
		select {
		case <-p.stderrDone:
		case <-t.C:
		}
		closeAll(p.stdin, p.stdout, p.stderr)
	})
}

func closeAll(cs ...io.Closer) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// lineRing keeps the last n lines a module wrote to stderr.
type lineRing struct {
	mu    sync.Mutex
	n     int
	lines []string
}

func newLineRing(n int) *lineRing { return &lineRing{n: n} }

func (r *lineRing) add(line string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, line)
	if len(r.lines) > r.n {
		r.lines = append(r.lines[:0:0], r.lines[len(r.lines)-r.n:]...)
	}
}

func (r *lineRing) snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.lines...)
}
