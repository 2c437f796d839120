package modules

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFrameReaderPassesJSONRPCAndStopsAtGarbage(t *testing.T) {
	in := "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n  {\"jsonrpc\":\"2.0\",\"method\":\"n\"}  \r\nnot json\n{\"jsonrpc\":\"2.0\",\"id\":2}\n"
	f := newFrameReader(strings.NewReader(in))
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	want := "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n{\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n"
	if string(got) != want {
		t.Fatalf("passed %q, want %q", got, want)
	}
	<-f.ended
	if !errors.Is(f.reason, errGarbage) || !strings.Contains(f.reason.Error(), "not json") {
		t.Fatalf("reason = %v", f.reason)
	}
}

func TestFrameReaderRefusesOtherJSON(t *testing.T) {
	for _, line := range []string{`{"id":1}`, `[{"jsonrpc":"2.0"}]`, `{"jsonrpc":"1.0"}`, `"jsonrpc"`} {
		f := newFrameReader(strings.NewReader(line + "\n"))
		if b, _ := io.ReadAll(f); len(b) != 0 {
			t.Errorf("%s passed through", line)
		}
		if !errors.Is(f.reason, errGarbage) {
			t.Errorf("%s: reason %v", line, f.reason)
		}
	}
}

func TestFrameReaderBoundsMessageSize(t *testing.T) {
	huge := `{"jsonrpc":"2.0","result":"` + strings.Repeat("a", maxFrame) + `"}` + "\n"
	f := newFrameReader(strings.NewReader(huge))
	if b, _ := io.ReadAll(f); len(b) != 0 {
		t.Fatal("an over-long message passed")
	}
	if f.reason == nil || !strings.Contains(f.reason.Error(), "longer than") {
		t.Fatalf("reason = %v", f.reason)
	}
}

// An over-long answer to one of the gateway's requests becomes an error answer to
// that request, wherever the id is (mcp-go and Python write it first, the
// TypeScript SDK last), and the session goes on.
func TestFrameReaderAnswersAnOverLongAnswer(t *testing.T) {
	big := strings.Repeat("a", maxFrame)
	next := `{"jsonrpc":"2.0","id":"sb-8","result":{}}` + "\n"
	for name, line := range map[string]string{
		"id first": `{"jsonrpc":"2.0","id":"sb-7","result":{"text":"` + big + `"}}` + "\n",
		"id last":  `{"result":{"text":"` + big + `"},"jsonrpc":"2.0","id": "sb-7"}` + "\n",
		// An "id" inside the result is not the message's: near the start with
		// the real one last, or near the end with the real one first.
		"nested id first": `{"result":{"items":[{"id":"sb-3"}],"text":"` + big + `"},"jsonrpc":"2.0","id":"sb-7"}` + "\n",
		"nested id last":  `{"jsonrpc":"2.0","id":"sb-7","result":{"text":"` + big + `","items":[{"id":"sb-3"}]}}` + "\n",
	} {
		f := newFrameReader(strings.NewReader(line + next))
		b, _ := io.ReadAll(f)
		lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		if len(lines) != 2 || lines[1] != strings.TrimSuffix(next, "\n") {
			t.Fatalf("%s: passed %d lines, want the error answer and the next: %.200q", name, len(lines), b)
		}
		var answer struct {
			ID    string `json:"id"`
			Error struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(lines[0]), &answer); err != nil || answer.ID != "sb-7" || answer.Error.Code != -32603 ||
			!strings.Contains(answer.Error.Message, "over 32 MiB") {
			t.Fatalf("%s: in its place %s (%v)", name, lines[0], err)
		}
		if !strings.Contains(f.reason.Error(), "stdout closed") {
			t.Fatalf("%s: the stream ended for %v, not at the end of stdout", name, f.reason)
		}
	}
}

// endless writes a line that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

// A module that writes without end breaks its session once maxSkipped is read,
// rather than hold the reader (and every answer behind it) for ever.
func TestFrameReaderEndsAnEndlessLine(t *testing.T) {
	f := newFrameReader(io.MultiReader(strings.NewReader(`{"jsonrpc":"2.0","id":"sb-1","result":"`), endless{}))
	if b, _ := io.ReadAll(f); len(b) != 0 {
		t.Fatal("something passed")
	}
	if f.reason == nil || !strings.Contains(f.reason.Error(), "no end to it") {
		t.Fatalf("reason = %v", f.reason)
	}
}

func TestFrameReaderReportsEOF(t *testing.T) {
	f := newFrameReader(strings.NewReader(`{"jsonrpc":"2.0","id":1}` + "\n"))
	if b, _ := io.ReadAll(f); len(b) == 0 {
		t.Fatal("nothing passed")
	}
	if f.reason == nil || !strings.Contains(f.reason.Error(), "stdout closed") {
		t.Fatalf("reason = %v", f.reason)
	}
}

func TestReadBoundedLine(t *testing.T) {
	long := strings.Repeat("x", 50)
	r := bufio.NewReaderSize(strings.NewReader("short\r\n"+long+"\nlast"), 16)
	var got []string
	for {
		line, err := readBoundedLine(r, 20)
		got = append(got, line)
		if err != nil {
			break
		}
	}
	want := []string{"short", strings.Repeat("x", 20) + " …[truncated]", "last"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("lines = %q, want %q", got, want)
	}
	ring := newLineRing(2)
	for _, l := range []string{"a", "b", "c"} {
		ring.add(l)
	}
	if s := ring.snapshot(); strings.Join(s, ",") != "b,c" {
		t.Fatalf("ring = %q", s)
	}
}

// A module that floods requests (mcp-go answers each on a goroutine that waits
// to write) gets a bounded number through; responses and notifications all pass.
func TestFrameReaderBoundsRequestsFromTheModule(t *testing.T) {
	var in bytes.Buffer
	const n = 2000
	for i := 0; i < n; i++ {
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":"srv%d","method":"roots/list"}`+"\n", i)
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","id":"sb-%d","result":{}}`+"\n", i)
		fmt.Fprintf(&in, `{"jsonrpc":"2.0","method":"notifications/message","params":{}}`+"\n")
	}
	out, err := io.ReadAll(newFrameReader(&in))
	if err != nil {
		t.Fatal(err)
	}
	var requests, responses, notes int
	for _, line := range bytes.Split(bytes.TrimSpace(out), []byte("\n")) {
		switch {
		case bytes.Contains(line, []byte(`"roots/list"`)):
			requests++
		case bytes.Contains(line, []byte(`"result"`)):
			responses++
		default:
			notes++
		}
	}
	if responses != n || notes != n {
		t.Fatalf("%d responses and %d notifications passed, want all %d of each", responses, notes, n)
	}
	if requests < moduleRequestBurst || requests > moduleRequestBurst+n/10 {
		t.Fatalf("%d of %d flooded requests passed, want about the burst of %d", requests, n, moduleRequestBurst)
	}
}

// A module that writes stderr without pause cannot flood the journal: lines past
// the rate are counted and said once, while the ring still keeps the last ones.
func TestStderrReachesTheLogAtABoundedRate(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logged, nil))
	ring := newLineRing(5)
	p := &process{stderr: r, stderrDone: make(chan struct{})}
	go p.readStderr(log, ring)
	const n = 5000
	for i := 0; i < n; i++ {
		fmt.Fprintf(w, "line %d\n", i)
	}
	w.Close()
	<-p.stderrDone
	out := logged.String()
	lines := strings.Count(out, "module stderr\" line=")
	if lines < stderrLogBurst || lines > stderrLogBurst+n/10 {
		t.Fatalf("%d of %d stderr lines logged, want about the burst of %d", lines, n, stderrLogBurst)
	}
	// Counted in one line, or more if the reading outlasted the count's timer.
	counted := countedLines(out)
	if !strings.Contains(out, "not logged") || counted != n-lines {
		t.Fatalf("%d suppressed lines counted in the log, want %d:\n%s", counted, n-lines, out[max(0, len(out)-400):])
	}
	if got := ring.snapshot(); len(got) != 5 || got[4] != fmt.Sprintf("line %d", n-1) {
		t.Fatalf("ring = %q, want the last 5 lines", got)
	}
}

// A burst over the rate followed by silence still gets its count logged, without
// waiting for the module's next line or its exit.
func TestStderrSuppressedCountIsLoggedAfterSilence(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	var mu sync.Mutex
	var logged bytes.Buffer
	log := slog.New(slog.NewTextHandler(writerFunc(func(b []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logged.Write(b)
	}), nil))
	p := &process{stderr: r, stderrDone: make(chan struct{})}
	go p.readStderrFlushing(log, newLineRing(5), 50*time.Millisecond)
	const n = stderrLogBurst + 100
	for i := 0; i < n; i++ {
		fmt.Fprintf(w, "line %d\n", i)
	}
	// Every line is either logged or counted; on a busy machine the reading may
	// outlast the first 50 ms, so the count can come in more than one line.
	deadline := time.Now().Add(waitLimit)
	for {
		mu.Lock()
		out := logged.String()
		mu.Unlock()
		lines, counted := strings.Count(out, "module stderr\" line="), countedLines(out)
		if counted > 0 && lines+counted == n {
			return
		}
		if lines+counted > n {
			t.Fatalf("%d lines logged and %d counted, more than the %d written:\n%s", lines, counted, n, out[max(0, len(out)-300):])
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d lines logged and %d counted of %d while the module stayed silent:\n%s", lines, counted, n, out[max(0, len(out)-300):])
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// countedLines adds up the "lines=N" of every over-rate count line in out.
func countedLines(out string) int {
	counted := 0
	for _, m := range regexp.MustCompile(`lines=(\d+)`).FindAllStringSubmatch(out, -1) {
		k, _ := strconv.Atoi(m[1])
		counted += k
	}
	return counted
}
