package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// The stateless revision's cost per todo against a session's, in one process:
// one agent drains one queue, a todo (claim_next, complete) at a time, switching
// between a 2025-11-25 session and stateless 2026-07-28 requests after every todo,
// so that both see the same machine at the same moment. The client is plain HTTP
// with the bodies written out, so that what differs is the server's work and the
// bytes on the wire. Reported: each path's median time per todo, and their ratio.
//
//	go test -run '^$' -bench StatelessVsSession -benchtime 3000x ./agent/
//	SWITCHBOARD_BENCH_SYNC=NORMAL go test -run '^$' -bench StatelessVsSession -benchtime 3000x ./agent/
func BenchmarkStatelessVsSession(b *testing.B) {
	e := benchEnv(b)
	_, cred := e.endpoint("bench", []string{"inbox"}, nil)
	if err := e.st.SeedTodosForBench(context.Background(), "inbox", 2*b.N, `{"n":1}`); err != nil {
		b.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 2}}
	session := e.rawSession(cred)
	paths := []*benchPath{
		{name: "session", header: http.Header{"Mcp-Session-Id": {session}, mcp.HeaderProtocolVersion: {SessionProtocolVersion}}},
		{name: "stateless", header: http.Header{mcp.HeaderProtocolVersion: {statelessVersion}}, meta: `"_meta":{"` +
			mcp.MetaKeyProtocolVersion + `":"` + statelessVersion + `","` + mcp.MetaKeyClientCapabilities + `":{}},`},
	}
	for _, p := range paths {
		p.header.Set("Authorization", "Bearer "+cred)
		p.header.Set("Content-Type", "application/json")
		p.header.Set("Accept", "application/json, text/event-stream")
		p.took = make([]time.Duration, 0, b.N)
	}
	b.ResetTimer()
	for i := range b.N {
		for j := range paths {
			p := paths[(i+j)%2] // each goes first every other todo
			start := time.Now()
			if err := p.todo(e.url, hc); err != nil {
				b.Fatalf("%s: %v", p.name, err)
			}
			p.took = append(p.took, time.Since(start))
		}
	}
	b.StopTimer()
	med := make([]float64, len(paths))
	for i, p := range paths {
		slices.Sort(p.took)
		med[i] = float64(p.took[len(p.took)/2].Microseconds())
		b.ReportMetric(med[i], p.name+"-µs/todo")
	}
	b.ReportMetric(med[1]/med[0], "stateless/session")
}

// benchPath is one revision's way of calling the server, and its times per todo.
type benchPath struct {
	name   string
	header http.Header
	meta   string // the members a stateless request's params begin with
	id     int
	took   []time.Duration
}

// todo claims the next todo and completes it.
func (p *benchPath) todo(url string, hc *http.Client) error {
	var claim claimResult
	if err := p.call(url, hc, VerbClaimNext, `{}`, &claim); err != nil {
		return err
	}
	if !claim.Claimed {
		return fmt.Errorf("nothing to claim: %s", claim.Message)
	}
	return p.call(url, hc, VerbComplete, fmt.Sprintf(`{"todo_id":%d,"lease_seq":%d}`, claim.Todo.ID, claim.LeaseSeq), nil)
}

func (p *benchPath) call(url string, hc *http.Client, tool, args string, out any) error {
	p.id++
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{%s"name":%q,"arguments":%s}}`, p.id, p.meta, tool, args)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return err
	}
	req.Header = p.header.Clone()
	if p.meta != "" {
		req.Header.Set(mcp.HeaderMethod, "tools/call")
		req.Header.Set(mcp.HeaderName, tool)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var rpc struct {
		Result struct {
			IsError           bool            `json:"isError"`
			StructuredContent json.RawMessage `json:"structuredContent"`
		} `json:"result"`
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(data, &rpc) != nil || rpc.Result.IsError {
		return fmt.Errorf("%s: HTTP %d: %s", tool, resp.StatusCode, data)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(rpc.Result.StructuredContent, out)
}
