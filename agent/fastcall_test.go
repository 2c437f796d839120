package agent

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

// rawSession opens a session over raw HTTP and returns its id.
func (e *env) rawSession(cred string) string {
	e.t.Helper()
	resp, body := e.raw(http.MethodPost, cred, "", initializeBody, nil)
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		e.t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	if resp, body := e.raw(http.MethodPost, cred, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`, nil); resp.StatusCode != http.StatusAccepted {
		e.t.Fatalf("notifications/initialized: %d %s", resp.StatusCode, body)
	}
	return id
}

// callBody is a tools/call request of tool with args.
func callBody(id, tool string, args any) string {
	b, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": "tools/call",
		"params": map[string]any{"name": tool, "arguments": args}})
	return string(b)
}

// answerOf decodes a JSON-RPC answer, as JSON or as the last event of a stream.
func answerOf(t *testing.T, resp *http.Response, body string) map[string]any {
	t.Helper()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("HTTP %d: %s", resp.StatusCode, body)
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		i := strings.LastIndex(body, "data: ")
		body = strings.TrimSpace(body[i+len("data: "):])
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("decode %q: %v", body, err)
	}
	return m
}

// The verbs' own path answers what mcp-go would: the same result (its text copy,
// structured content and error flag) for a verb's result and for its refusal,
// with the request's id, whether a number or a string.
func TestFastCallAnswersAsMCPGoDoes(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("w", []string{"inbox"}, nil)
	// A payload with what JSON encoders escape differently.
	const payload = `{"html":"<b>&amp;</b>","quote":"\"","line":"\u2028","emoji":"🦀","ctl":"\u0001"}`
	e.addTodo("inbox", payload)
	sid := e.rawSession(cred)

	send := func(fast bool, body string) (map[string]any, int64) {
		e.ag.fastOff.Store(!fast)
		defer e.ag.fastOff.Store(false)
		before := e.ag.fastAnswered.Load()
		resp, answer := e.raw(http.MethodPost, cred, sid, body, nil)
		return answerOf(t, resp, answer), e.ag.fastAnswered.Load() - before
	}
	call := func(fast bool, id, tool string, args any) (map[string]any, int64) {
		return send(fast, callBody(id, tool, args))
	}
	for _, c := range []struct {
		id, tool string
		args     any
		isError  bool
		body     string // the request as sent, when not callBody's
	}{
		{`7`, VerbListTodos, map[string]any{"queue": "inbox"}, false, ""},
		{`"req-8"`, VerbListTodos, map[string]any{"state": "pending"}, false, ""},
		{`9`, VerbComplete, map[string]any{"todo_id": 12345, "lease_seq": 1}, true, ""},
		{`10`, VerbGetDefaultLease, map[string]any{}, false, ""},
		// Members in another order, and spaces anywhere JSON allows them.
		{`12`, VerbListTodos, nil, false, " { \"params\" : { \"arguments\" : { \"queue\" : \"inbox\" } , \"name\" :" +
			" \"list_todos\" } , \"method\" : \"tools/call\" , \"id\" : 12 , \"jsonrpc\" : \"2.0\" }\n"},
	} {
		if c.body == "" {
			c.body = callBody(c.id, c.tool, c.args)
		}
		viaMCP, n := send(false, c.body)
		if n != 0 {
			t.Fatalf("%s: answered by the fast path while it was off", c.tool)
		}
		viaFast, n := send(true, c.body)
		if n != 1 {
			t.Fatalf("%s: not answered by the fast path", c.tool)
		}
		if !reflect.DeepEqual(viaFast, viaMCP) {
			t.Fatalf("%s: the fast path answered\n%v\nmcp-go answered\n%v", c.tool, viaFast, viaMCP)
		}
		res, _ := viaFast["result"].(map[string]any)
		if isErr, _ := res["isError"].(bool); isErr != c.isError {
			t.Fatalf("%s: isError %v, want %v: %v", c.tool, isErr, c.isError, viaFast)
		}
		if id, _ := json.Marshal(viaFast["id"]); string(id) != c.id {
			t.Fatalf("%s: answered with id %s, want %s", c.tool, id, c.id)
		}
	}

	// A claimed todo's payload comes back whole, in both forms.
	claimed, n := call(true, `11`, VerbClaimNext, map[string]any{})
	if n != 1 {
		t.Fatal("claim_next: not answered by the fast path")
	}
	res := claimed["result"].(map[string]any)
	var fromText any
	if err := json.Unmarshal([]byte(res["content"].([]any)[0].(map[string]any)["text"].(string)), &fromText); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(fromText, res["structuredContent"]) {
		t.Fatalf("the text copy %v differs from the structured result %v", fromText, res["structuredContent"])
	}
	if got := res["structuredContent"].(map[string]any)["todo"].(map[string]any)["payload"]; got != payload {
		t.Fatalf("payload %#v, want %#v", got, payload)
	}
}

// Calls of another shape go to mcp-go, which answers them as it always has: a
// request with _meta (a progress token), one without the protocol version
// header, an id that is not an integer or a string, a batch, and a verb the
// endpoint was not granted.
func TestFastCallLeavesOtherCallsToMCPGo(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("w", []string{"inbox"}, []string{VerbListTodos})
	sid := e.rawSession(cred)
	list := map[string]any{"queue": "inbox"}
	for _, c := range []struct {
		name, body string
		header     map[string]string
		want       string // in the answer
	}{
		{"_meta", `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"list_todos","arguments":{"queue":"inbox"},"_meta":{"progressToken":"p"}}}`, nil, `"todos"`},
		{"no version header", callBody(`4`, VerbListTodos, list), map[string]string{"Mcp-Protocol-Version": ""}, `"todos"`},
		{"fractional id", callBody(`5.5`, VerbListTodos, list), nil, `"todos"`},
		{"batch", "[" + callBody(`6`, VerbListTodos, list) + "]", nil, ``},
		// Echoed as sent, it would make the answer invalid UTF-8.
		{"id not UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":\"a\xffb\",\"method\":\"tools/call\",\"params\":{\"name\":\"list_todos\",\"arguments\":{\"queue\":\"inbox\"}}}", nil, `"todos"`},
		{"verb not granted", callBody(`7`, VerbClaimNext, map[string]any{}), nil, `claim_next`},
		// mcp-go takes a message with a result for a response: 202, and no call.
		{"result member", `{"jsonrpc":"2.0","id":9,"method":"tools/call","result":{},"params":{"name":"list_todos","arguments":{}}}`, nil, ``},
		// A second params does not hide the first's _meta, which names the
		// stateless revision: a request of it in a session is refused.
		{"params twice", `{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}},"params":{"name":"list_todos","arguments":{}}}`, nil, `Mcp-Session-Id is not part`},
		// mcp-go refuses a member given twice, or spelt in another case, which
		// encoding/json would read as the member.
		{"params twice, plain", `{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"list_todos","arguments":{"queue":"elsewhere"}},"params":{"name":"list_todos"}}`, nil, `duplicate member`},
		{"arguments twice", `{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"list_todos","arguments":{"queue":"elsewhere"},"arguments":{}}}`, nil, `duplicate member`},
		{"id twice", `{"jsonrpc":"2.0","id":13,"id":14,"method":"tools/call","params":{"name":"list_todos","arguments":{}}}`, nil, `duplicate member`},
		{"Params", `{"jsonrpc":"2.0","id":15,"method":"tools/call","Params":{"name":"list_todos","arguments":{}}}`, nil, `not the defined name`},
		{"paramſ", `{"jsonrpc":"2.0","id":16,"method":"tools/call","paramſ":{"name":"list_todos","arguments":{}}}`, nil, `not the defined name`},
		{"escaped name", `{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"n\u0061me":"list_todos","arguments":{}}}`, nil, `"todos"`},
		{"a member mcp-go ignores", `{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"list_todos","arguments":{}},"x":1}`, nil, `"todos"`},
	} {
		before := e.ag.fastAnswered.Load()
		resp, body := e.raw(http.MethodPost, cred, sid, c.body, c.header)
		if n := e.ag.fastAnswered.Load() - before; n != 0 {
			t.Fatalf("%s: answered by the fast path", c.name)
		}
		if resp.StatusCode >= 500 || !strings.Contains(body, c.want) {
			t.Fatalf("%s: HTTP %d %s", c.name, resp.StatusCode, body)
		}
		if c.name == "result member" && (resp.StatusCode != http.StatusAccepted || body != "") {
			t.Fatalf("%s: HTTP %d %q, want mcp-go's 202 for a response", c.name, resp.StatusCode, body)
		}
	}
	// And the plain call is taken.
	before := e.ag.fastAnswered.Load()
	if resp, body := e.raw(http.MethodPost, cred, sid, callBody(`8`, VerbListTodos, list), nil); !strings.Contains(body, `"todos"`) ||
		e.ag.fastAnswered.Load() == before {
		t.Fatalf("a plain call: HTTP %d %s, fast path taken: %v", resp.StatusCode, body, e.ag.fastAnswered.Load() != before)
	}
}

// tools/list_changed sent to a session without a GET stream waits in mcp-go's
// queue for the session's next POST: that POST goes through mcp-go, which
// streams the notification ahead of the answer; the one after is fast again. A
// notification or a response mcp-go answers 202 does not count as that POST (mcp-go
// streams nothing on it, unless its forwarder happens to be quick).
func TestFastCallLetsListChangedThrough(t *testing.T) {
	e := newEnv(t)
	ep, cred := e.endpoint("w", []string{"inbox"}, nil)
	sid := e.rawSession(cred)
	list := callBody(`2`, VerbListTodos, map[string]any{"queue": "inbox"})
	e.raw(http.MethodPost, cred, sid, list, nil)
	call := func() (fast bool, body string) {
		t.Helper()
		before := e.ag.fastAnswered.Load()
		resp, body := e.raw(http.MethodPost, cred, sid, list, nil)
		answerOf(t, resp, body)
		return e.ag.fastAnswered.Load() != before, body
	}

	e.ag.RefreshSessions(context.Background(), ep.ID)
	if fast, body := call(); fast || !strings.Contains(body, "notifications/tools/list_changed") {
		t.Fatalf("the POST after tools/list_changed: fast %v, %s", fast, body)
	}
	if fast, _ := call(); !fast {
		t.Fatal("the POST after that was not answered by the fast path")
	}

	e.ag.RefreshSessions(context.Background(), ep.ID)
	for _, msg := range []string{`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}}`,
		`{"jsonrpc":"2.0","id":"srv-1","result":{}}`} {
		// 202, or 200 when mcp-go's forwarder happened to take the waiting
		// notification and stream it on this answer.
		if resp, body := e.raw(http.MethodPost, cred, sid, msg, nil); resp.StatusCode != http.StatusAccepted &&
			resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: HTTP %d %s", msg, resp.StatusCode, body)
		}
	}
	if fast, _ := call(); fast {
		t.Fatal("after a notification and a response, the next call was answered by the fast path")
	}
	if fast, _ := call(); !fast {
		t.Fatal("the call after that was not answered by the fast path")
	}
}

// The idle sweep hears the calls the fast path answers: a session that only
// calls verbs lives on, one left alone with a GET stream open lives on, and one
// left alone without is ended, no sooner than a TTL after its last request.
func TestIdleSweepHearsFastCalls(t *testing.T) {
	const ttl = 400 * time.Millisecond
	e := newEnv(t, func(c *envConfig) { c.agent.SessionIdleTTL = ttl })
	_, cred := e.endpoint("w", []string{"inbox"}, nil)
	busy, listening, alone := e.rawSession(cred), e.rawSession(cred), e.rawSession(cred)
	e.listen(t, cred, listening)
	list := callBody(`2`, VerbListTodos, map[string]any{"queue": "inbox"})
	before := e.ag.fastAnswered.Load()
	last := time.Now() // no later than the request's arrival, from which the TTL counts
	e.raw(http.MethodPost, cred, alone, list, nil)
	calls := 0
	var aloneEnded time.Duration
	for end := time.Now().Add(5 * ttl); time.Now().Before(end); calls++ {
		resp, body := e.raw(http.MethodPost, cred, busy, list, nil)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("call %d of the busy session: HTTP %d %s", calls, resp.StatusCode, body)
		}
		if aloneEnded == 0 && e.ag.sessions.get(alone) == nil {
			aloneEnded = time.Since(last)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if fast := e.ag.fastAnswered.Load() - before; fast < int64(calls) {
		t.Fatalf("%d of %d calls took the fast path", fast, calls+1)
	}
	if e.ag.sessions.get(listening) == nil {
		t.Fatal("a session with a GET stream open was swept")
	}
	if aloneEnded < ttl {
		t.Fatalf("the session left alone ended %v after its last request (0: never), want at least %v", aloneEnded, ttl)
	}
	resp, body := e.raw(http.MethodPost, cred, alone, list, nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "idle for 400ms") {
		t.Fatalf("the swept session answered %d %q", resp.StatusCode, body)
	}
}

// The envelope reads params in one pass as the two decoders it stands for read
// them: its merged members as a plain struct does, whatever the order and
// repetition of members, and the call, in a message the fast paths take
// (plainMembers), as mcp-go's CallToolRequest does.
func TestEnvelopeReadsParamsAsItsDecodersDo(t *testing.T) {
	for _, body := range []string{
		`{"params":{"name":"claim_next","arguments":{"queue":"a"}}}`,
		`{"params":{"arguments":{"queue":"a"},"name":"complete","task":{"ttl":1}}}`,
		`{"params":{"name":"a","arguments":null,"_meta":{"k":1}}}`,
		`{"params":{"name":"a","requestState":"s"}}`,
		`{"params":{"inputResponses":{},"name":null}}`,
		`{"params":null}`,
		`{"params":{"name":"claim_next","arguments":{"queue":"a"}},"params":{"name":"complete"}}`,
		`{"params":{"name":"claim_next","arguments":{"queue":"a"}},"params":{"arguments":null}}`,
		`{"params":{"name":"claim_next","uri":"u","_meta":{"k":1}},"params":{"name":null,"uri":null,"task":{"ttl":1}}}`,
		`{"params":{"name":"a","_meta":{"k":1}},"params":{"_meta":null,"name":""}}`,
		`{"params":{"name":"a","arguments":[1,2]},"params":null}`,
		`{"params":{"NAME":"a","Arguments":{"x":1},"requestState":"s","inputResponses":{}}}`,
		`{"params":{}}`,
		`{}`,
	} {
		env := readEnvelope(http.Header{"Content-Type": {"application/json"}}, []byte(body))
		if env == nil {
			t.Fatalf("%s: not read", body)
		}
		var plain struct {
			Params struct {
				Meta json.RawMessage `json:"_meta"`
				Task json.RawMessage `json:"task"`
				Name string          `json:"name"`
				URI  string          `json:"uri"`
			} `json:"params"`
		}
		var req mcp.CallToolRequest
		if err := json.Unmarshal([]byte(body), &plain); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(body), &req); err != nil {
			t.Fatal(err)
		}
		got, p := env.Params, plain.Params
		if string(got.Meta) != string(p.Meta) || string(got.Task) != string(p.Task) || got.Name != p.Name || got.URI != p.URI {
			t.Fatalf("%s: merged members %+v, a plain struct reads %+v", body, got, p)
		}
		if !plainMembers([]byte(body)) {
			continue
		}
		c := got.call
		mrt := !absent(c.InputResponses) || !absent(c.RequestState)
		if c.Name != req.Params.Name || string(c.Arguments) != string(req.Params.RawArguments) ||
			absent(c.Meta) != (req.Params.Meta == nil) || absent(c.Task) != (req.Params.Task == nil) ||
			mrt != !reflect.ValueOf(req.Params.MultiRoundTripParams).IsZero() {
			t.Fatalf("%s: the call read as %+v, mcp-go reads %+v", body, c, req.Params)
		}
	}
}

// An id the fast paths carry back as sent (plainID) is the one mcp-go writes
// back, and echoID writes any id as mcp-go does: ids from the table, and random
// integers, numbers and strings.
func TestIDsAreWrittenBackAsMCPGoWritesThem(t *testing.T) {
	srv := server.NewMCPServer("t", "1")
	mcpGoWrites := func(id string) string {
		answer, err := json.Marshal(srv.HandleMessage(context.Background(), json.RawMessage(`{"jsonrpc":"2.0","id":`+id+`,"method":"ping"}`)))
		if err != nil {
			t.Fatal(err)
		}
		var a struct{ ID json.RawMessage }
		if err := json.Unmarshal(answer, &a); err != nil {
			t.Fatal(err)
		}
		return string(a.ID)
	}
	ids := []string{`0`, `-0`, `7`, `-7`, `9007199254740991`, `9007199254740993`, `-9223372036854775808`,
		`9223372036854775807`, `1.0`, `1e2`, `1.5`, `-0.0`, `"a"`, `""`, `"A"`, `"\/"`, `"a<b"`, `"&"`,
		`"é"`, `" "`, `"a b"`, `""q""`, `"~"`}
	rng := rand.New(rand.NewPCG(9, 9))
	for range 500 {
		ids = append(ids, strconv.FormatInt(rng.Int64()>>rng.IntN(64), 10), strconv.FormatInt(-rng.Int64()>>rng.IntN(64), 10),
			strconv.FormatFloat(rng.Float64()*1e6, 'g', -1, 64))
		b := make([]byte, rng.IntN(6))
		for i := range b {
			b[i] = byte(0x20 + rng.IntN(0x60))
		}
		id, _ := json.Marshal(string(b))
		ids = append(ids, string(id))
	}
	plain := 0
	for _, id := range ids {
		want := mcpGoWrites(id)
		if got := string(echoID(json.RawMessage(id))); got != want {
			t.Fatalf("id %s: echoID writes %s, mcp-go %s", id, got, want)
		}
		if plainID(json.RawMessage(id)) {
			plain++
			if id != want {
				t.Fatalf("id %s: plain, but mcp-go writes it back as %s", id, want)
			}
		}
	}
	if plain < len(ids)/3 {
		t.Fatalf("only %d of %d ids plain", plain, len(ids))
	}
}

// plainMembers passes only messages made of the members the fast paths read,
// each once and spelt as defined, and so none that mcp-go refuses for its
// members' names: those in the table, and random ones built of the members, the
// same in other cases and spellings, twice or not, in any order.
func TestPlainMembersPassesNoMessageMCPGoRefuses(t *testing.T) {
	srv := server.NewMCPServer("t", "1")
	// refuses says whether mcp-go refuses a message for its members' names, and
	// checks that memberProblem refuses it in the same words, and only it.
	refuses := func(body string) bool {
		t.Helper()
		answer, err := json.Marshal(srv.HandleMessage(context.Background(), json.RawMessage(body)))
		if err != nil {
			t.Fatal(err)
		}
		var a struct {
			Error struct {
				Code    int
				Message string
			}
		}
		if err := json.Unmarshal(answer, &a); err != nil {
			t.Fatal(err)
		}
		refused := a.Error.Code == mcp.INVALID_REQUEST && strings.Contains(a.Error.Message, "member")
		ours := memberProblem([]byte(body))
		if refused != (ours != nil) || (refused && ours.Error() != a.Error.Message) {
			t.Fatalf("%s: mcp-go answers %s; memberProblem says %v", body, answer, ours)
		}
		return refused
	}
	for _, c := range []struct {
		body  string
		plain bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_todos","arguments":{"a":1,"a":2}}}`, true},
		{" {\"id\" :\"x\\\"y\",\n\"params\":{ \"arguments\":[{\"name\":1},\"}\"] } }\t", true},
		{`{"params":{}}`, true},
		{`{}`, true},
		{`{"params":null}`, false},
		{`{"params":{"name":"a"},"params":{"name":"b"}}`, false},
		{`{"params":{"name":"a","name":"b"}}`, false},
		{`{"id":1,"ID":2}`, false},
		{`{"Id":1}`, false},
		{`{"params":{"Name":"a"}}`, false},
		{`{"params":{"_META":{}}}`, false},
		{`{"result":{}}`, false},
		{`{"error":{}}`, false},
		{`{"params":{"uri":"u"}}`, false},
		{`{"p\u0061rams":{}}`, false},
		{`{"jsonrpc":"2.0"} `, true},
		{`{"params":{"notifications":{},"NOTIFICATIONS":{}}}`, false},
		{`{"params":{"cursor":"a","cursor":"b"}}`, false},
		{`{"p\u0061rams":{"name":"a","n\u0061me":"b"}}`, false},
		{`{"params":[{"name":1,"name":2}],"x":{"id":1,"id":2}}`, false},
	} {
		if got := plainMembers([]byte(c.body)); got != c.plain {
			t.Fatalf("%s: plain %v, want %v", c.body, got, c.plain)
		}
		if c.plain && refuses(c.body) {
			t.Fatalf("%s: plain, and mcp-go refuses it", c.body)
		}
	}

	spell := map[string][]string{
		"jsonrpc": {"jsonrpc", "JSONRPC"}, "id": {"id", "ID", "iD", `\u0069d`}, "method": {"method", "Method"},
		"params": {"params", "Params", "paramſ", `p\u0061rams`}, "name": {"name", "NAME", "nameſ", `n\u0041me`},
		"arguments": {"arguments", "Arguments"}, "_meta": {"_meta", "_Meta"}, "x": {"x"},
	}
	value := map[string]string{"jsonrpc": `"2.0"`, "id": `7`, "method": `"tools/call"`, "name": `"list_todos"`,
		"arguments": `{"queue":"q"}`, "_meta": `{}`, "x": `1`}
	rng := rand.New(rand.NewPCG(7, 7))
	object := func(members []string, inner func() string) string {
		var parts []string
		for _, m := range members {
			if rng.IntN(8) == 0 || (m == "x" && rng.IntN(4) != 0) {
				continue
			}
			for range 1 + rng.IntN(8)/7 {
				v := value[m]
				if m == "params" {
					v = inner()
				}
				name := m
				if rng.IntN(8) == 0 {
					name = spell[m][rng.IntN(len(spell[m]))]
				}
				parts = append(parts, `"`+name+`":`+v)
			}
		}
		rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
		return "{" + strings.Join(parts, ",") + "}"
	}
	plain, refused := 0, 0
	for range 3000 {
		body := object([]string{"jsonrpc", "id", "method", "params", "x"}, func() string {
			return object([]string{"name", "arguments", "_meta", "x"}, nil)
		})
		p, r := plainMembers([]byte(body)), refuses(body)
		if p && r {
			t.Fatalf("%s: plain, and mcp-go refuses it", body)
		}
		plain, refused = plain+btoi(p), refused+btoi(r)
	}
	if plain < 100 || refused < 100 {
		t.Fatalf("of 3,000 random messages %d plain and %d refused: the generator misses a side", plain, refused)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A verb's text goes out escaped byte for byte as json.Marshal escapes it,
// whatever it holds: strings built from the characters JSON encoders treat
// differently, and random bytes.
func TestAppendJSONStringIsJSONMarshal(t *testing.T) {
	parts := []string{`{"a":`, `"`, `\`, `\"`, "<", ">", "&", "\u2028", "\u2029", "\x00", "\x1f", "\x7f", "é", "🦀",
		"\xff", "\xe2\x80", "plain text ", `\u003c`, "\t", "\n"}
	rng := rand.New(rand.NewPCG(34, 1))
	var cases []string
	for range 2000 {
		var sb strings.Builder
		for range rng.IntN(12) {
			sb.WriteString(parts[rng.IntN(len(parts))])
		}
		cases = append(cases, sb.String())
		raw := make([]byte, rng.IntN(16))
		for i := range raw {
			raw[i] = byte(rng.IntN(256))
		}
		cases = append(cases, string(raw))
	}
	for _, s := range cases {
		want, _ := json.Marshal(s)
		if got := appendJSONString([]byte("prefix:"), s); string(got) != "prefix:"+string(want) {
			t.Fatalf("%q: wrote %s, json.Marshal writes %s", s, got, want)
		}
	}
}
