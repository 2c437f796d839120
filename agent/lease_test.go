package agent

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mark3labs/mcp-go/mcp"

	"github.com/switchboardhq/switchboard/reaper"
	"github.com/switchboardhq/switchboard/store"
)

func ptr[T any](v T) *T { return &v }

func TestLeaseTTLRule(t *testing.T) {
	cases := []struct {
		name      string
		requested *float64
		def       int
		want      time.Duration
		invalid   bool
	}{
		{"built-in default", nil, 0, DefaultLeaseSeconds * time.Second, false},
		{"endpoint default", nil, 3600, time.Hour, false},
		{"endpoint default above the cap", nil, MaxLeaseSeconds * 2, MaxLeaseSeconds * time.Second, false},
		{"per call wins over endpoint default", ptr(60.0), 3600, time.Minute, false},
		{"per call is cut to the cap", ptr(float64(MaxLeaseSeconds + 1)), 0, MaxLeaseSeconds * time.Second, false},
		{"zero", ptr(0.0), 0, 0, true},
		{"negative", ptr(-1.0), 3600, 0, true},
		{"fraction", ptr(1.5), 0, 0, true},
	}
	for _, tc := range cases {
		got, err := leaseTTL(tc.requested, tc.def)
		if tc.invalid {
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidArgument {
				t.Errorf("%s: err = %v, want invalid_argument", tc.name, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: %v, %v; want %v", tc.name, got, err, tc.want)
		}
	}
}

// The contract stated is the contract enforced: every text quotes the constants
// and the endpoint's default, and no other lease numbers.
func TestLeaseTextsQuoteTheConstants(t *testing.T) {
	def, maxS := strconv.Itoa(DefaultLeaseSeconds), strconv.Itoa(MaxLeaseSeconds)
	for _, endpointDefault := range []int{0, 3600} {
		eff := strconv.Itoa(effectiveDefault(endpointDefault))
		texts := map[string]string{
			"instructions": instructions(endpointDefault),
			"claim":        claimDescription(endpointDefault),
			"claim_next":   claimNextDescription(endpointDefault),
			"heartbeat":    heartbeatDescription(endpointDefault),
			"schema":       leaseTTLSchemaText(endpointDefault),
		}
		for name, text := range texts {
			for _, want := range []string{eff + " seconds", maxS} {
				if !strings.Contains(text, want) {
					t.Errorf("default %d: %s text lacks %q:\n%s", endpointDefault, name, want, text)
				}
			}
			if endpointDefault > 0 && name != "schema" && !strings.Contains(text, "built-in default is "+def) {
				t.Errorf("default %d: %s text does not name the built-in %s", endpointDefault, name, def)
			}
			if name != "schema" && (!strings.Contains(text, "heartbeat") || !strings.Contains(text, "conflict") ||
				!strings.Contains(text, "irreversible")) {
				t.Errorf("%s text does not state the heartbeat/conflict rules", name)
			}
			if (name == "instructions" || name == "claim" || name == "claim_next") && !strings.Contains(text, leaseSeqRule) {
				t.Errorf("%s text does not say who may act without lease_seq", name)
			}
		}
	}
}

// A session reads the contract with its endpoint's default, and set_default_lease
// rewrites the three lease tools on the endpoint's live sessions.
func TestSetDefaultLeaseReregistersLiveSessions(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("slow", []string{"inbox"}, nil, func(s *store.EndpointSpec) { s.DefaultLeaseTTL = ptr(1800) })
	watcher := e.dial(cred, true)
	setter := e.dial(cred, false)
	if got := watcher.init.Instructions; !strings.HasPrefix(got, instructions(1800)) {
		t.Fatalf("instructions = %q, want the endpoint's (1800 s)", got)
	}
	descs := func(c *agentClient) map[string]string {
		res, err := c.ListTools(t.Context(), mcp.ListToolsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, tool := range res.Tools {
			out[tool.Name] = tool.Description
		}
		return out
	}
	if d := descs(watcher); d[VerbClaim] != claimDescription(1800) || d[VerbHeartbeat] != heartbeatDescription(1800) {
		t.Fatalf("descriptions do not quote the endpoint default:\n%s", d[VerbClaim])
	}

	var info leaseInfo
	setter.ok(t, VerbSetDefaultLease, map[string]any{"default_lease_ttl_seconds": 7200}, &info)
	if info.DefaultLeaseTTLSeconds == nil || *info.DefaultLeaseTTLSeconds != 7200 || info.EffectiveLeaseTTLSeconds != 7200 {
		t.Fatalf("set_default_lease answered %+v", info)
	}
	waitNote(t, watcher, string(mcp.MethodNotificationToolsListChanged))
	d := descs(watcher)
	for name, want := range map[string]string{VerbClaim: claimDescription(7200), VerbClaimNext: claimNextDescription(7200),
		VerbHeartbeat: heartbeatDescription(7200)} {
		if d[name] != want {
			t.Errorf("%s description after the edit:\n%s\nwant\n%s", name, d[name], want)
		}
	}

	// The new default applies to the next claim, read from the database.
	td := e.addTodo("inbox", "p")
	setter.ok(t, VerbClaim, map[string]any{"todo_id": td.ID}, nil)
	if want := e.clock.Now().Add(2 * time.Hour); !e.todo(td.ID).LeaseExpiry.Equal(want) {
		t.Fatalf("lease after the edit expires %v, want %v", e.todo(td.ID).LeaseExpiry, want)
	}
	var got leaseInfo
	watcher.ok(t, VerbGetDefaultLease, nil, &got)
	if got.EffectiveLeaseTTLSeconds != 7200 || got.BuiltinLeaseTTLSeconds != DefaultLeaseSeconds || got.MaxLeaseTTLSeconds != MaxLeaseSeconds {
		t.Fatalf("get_default_lease = %+v", got)
	}
	// 0 restores the built-in default.
	setter.ok(t, VerbSetDefaultLease, map[string]any{"default_lease_ttl_seconds": 0}, &info)
	if info.DefaultLeaseTTLSeconds != nil || info.EffectiveLeaseTTLSeconds != DefaultLeaseSeconds {
		t.Fatalf("clearing the default answered %+v", info)
	}
}

// An edit made by a human (the CLI) applies to the next claim without a reconnect.
func TestDefaultLeaseReadPerCall(t *testing.T) {
	e := newEnv(t)
	ep, cred := e.endpoint("edited", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	if _, err := e.st.UpdateEndpoint(t.Context(), ep.ID, store.EndpointSpec{DefaultLeaseTTL: ptr(600)}, "human:cli"); err != nil {
		t.Fatal(err)
	}
	td := e.addTodo("inbox", "p")
	c.ok(t, VerbClaimNext, nil, nil)
	if want := e.clock.Now().Add(10 * time.Minute); !e.todo(td.ID).LeaseExpiry.Equal(want) {
		t.Fatalf("lease %v, want %v", e.todo(td.ID).LeaseExpiry, want)
	}
}

// A heartbeat without lease_ttl_seconds uses the endpoint default and never cuts a
// longer lease back.
func TestHeartbeatNeverShortens(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("long", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	td := e.addTodo("inbox", "p")
	c.ok(t, VerbClaim, map[string]any{"todo_id": td.ID, "lease_ttl_seconds": 4 * 3600}, nil)
	long := e.clock.Now().Add(4 * time.Hour)
	e.clock.Add(time.Minute)
	c.ok(t, VerbHeartbeat, map[string]any{"todo_id": td.ID}, nil)
	if got := e.todo(td.ID).LeaseExpiry; !got.Equal(long) {
		t.Fatalf("bare heartbeat moved a 4 h lease to %v", got)
	}
	// Per-call values above the cap are cut to it.
	c.ok(t, VerbHeartbeat, map[string]any{"todo_id": td.ID, "lease_ttl_seconds": MaxLeaseSeconds * 10}, nil)
	if want := e.clock.Now().Add(MaxLeaseSeconds * time.Second); !e.todo(td.ID).LeaseExpiry.Equal(want) {
		t.Fatalf("lease %v, want the cap %v", e.todo(td.ID).LeaseExpiry, want)
	}
}

// A lapsed lease is lost at once: heartbeat, complete and fail answer conflict
// before the reaper runs, and a worker that lost a todo can never complete it
// after another worker of the same agent claimed it.
func TestLapsedLeaseIsLost(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("pool", []string{"inbox"}, nil)
	first, second := e.dial(cred, false), e.dial(cred, false)
	td := e.addTodo("inbox", "p")
	var claim struct {
		LeaseSeq int64 `json:"lease_seq"`
	}
	first.ok(t, VerbClaim, map[string]any{"todo_id": td.ID, "lease_ttl_seconds": 60}, &claim)
	e.clock.Add(61 * time.Second)
	for _, verb := range []string{VerbHeartbeat, VerbComplete, VerbRelease} {
		if code := first.code(t, verb, map[string]any{"todo_id": td.ID}); code != CodeConflict {
			t.Errorf("%s on a lapsed lease: %s, want conflict", verb, code)
		}
	}
	if code := first.code(t, VerbFail, map[string]any{"todo_id": td.ID, "error": "late"}); code != CodeConflict {
		t.Errorf("fail on a lapsed lease: %s", code)
	}

	// The reaper requeues it; the same agent claims it again from another session.
	res, err := reaper.New(e.st, reaper.Options{Logger: e.quiet}).RunOnce(t.Context())
	if err != nil || res.Requeued != 1 {
		t.Fatalf("reaper pass = %+v, %v; want 1 requeued", res, err)
	}
	var again struct {
		LeaseSeq int64 `json:"lease_seq"`
	}
	second.ok(t, VerbClaimNext, nil, &again)
	if again.LeaseSeq <= claim.LeaseSeq {
		t.Fatalf("new lease_seq %d not after %d", again.LeaseSeq, claim.LeaseSeq)
	}
	// The first worker, same owner, now holds a stale lease: with its lease_seq,
	// and without it (its session remembers), it cannot act.
	if code := first.code(t, VerbComplete, map[string]any{"todo_id": td.ID, "lease_seq": claim.LeaseSeq}); code != CodeConflict {
		t.Errorf("complete with a stale lease_seq: %s", code)
	}
	if code := first.code(t, VerbComplete, map[string]any{"todo_id": td.ID}); code != CodeConflict {
		t.Errorf("complete from the session that lost the lease: %s", code)
	}
	second.ok(t, VerbComplete, map[string]any{"todo_id": td.ID}, nil)
	if got := e.todo(td.ID); got.State != store.StateDone || got.Attempts != 2 {
		t.Fatalf("todo ended %s after %d attempts", got.State, got.Attempts)
	}
}

// A payload that is not UTF-8 (a binary webhook body) reaches the agent intact, as
// base64 and said so; JSON would otherwise replace its bytes with U+FFFD.
func TestClaimCarriesBinaryPayloadIntact(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("bin", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	raw := string([]byte{0xff, 0xfe, 'A', 0x00, 0xc3})
	bin := e.addTodo("inbox", raw)
	text := e.addTodo("inbox", `{"héllo":"wörld"}`)
	for _, want := range []struct {
		id       int64
		payload  string
		encoding string
	}{{bin.ID, base64.StdEncoding.EncodeToString([]byte(raw)), "base64"}, {text.ID, `{"héllo":"wörld"}`, "utf-8"}} {
		var got struct {
			Todo struct {
				Payload         string `json:"payload"`
				PayloadEncoding string `json:"payload_encoding"`
			} `json:"todo"`
		}
		c.ok(t, VerbClaim, map[string]any{"todo_id": want.id}, &got)
		if got.Todo.Payload != want.payload || got.Todo.PayloadEncoding != want.encoding {
			t.Errorf("todo %d: payload %q (%s), want %q (%s)", want.id, got.Todo.Payload, got.Todo.PayloadEncoding, want.payload, want.encoding)
		}
	}
}

// complete and fail keep an outcome, not an output: an oversized result or error is
// refused, and the lease and the todo are as they were.
func TestOversizedResultAndErrorRefused(t *testing.T) {
	e := newEnv(t)
	_, cred := e.endpoint("big", []string{"inbox"}, nil)
	c := e.dial(cred, false)
	todo := e.addTodo("inbox", "p")
	var claim claimResult
	c.ok(t, VerbClaim, map[string]any{"todo_id": todo.ID}, &claim)
	ack := map[string]any{"todo_id": todo.ID, "lease_seq": claim.LeaseSeq}
	with := func(k string, v any) map[string]any {
		m := map[string]any{k: v}
		for a, b := range ack {
			m[a] = b
		}
		return m
	}
	if code := c.code(t, VerbComplete, with("result", strings.Repeat("r", MaxResultBytes+1))); code != CodeInvalidArgument {
		t.Fatalf("oversized result: %s", code)
	}
	if code := c.code(t, VerbFail, with("error", strings.Repeat("e", MaxErrorBytes+1))); code != CodeInvalidArgument {
		t.Fatalf("oversized error: %s", code)
	}
	if got := e.todo(todo.ID); got.State != store.StateClaimed || got.Result != "" || got.LastError != "" {
		t.Fatalf("after the refusals the todo is %s, result %d bytes, error %d bytes", got.State, len(got.Result), len(got.LastError))
	}
	c.ok(t, VerbComplete, with("result", strings.Repeat("r", MaxResultBytes)), nil)
	if got := e.todo(todo.ID); got.State != store.StateDone || len(got.Result) != MaxResultBytes {
		t.Fatalf("a result of exactly the limit: %s, %d bytes", got.State, len(got.Result))
	}
}

// Without lease_seq, only the session that made a claim may act on it. Session 1
// claims, its lease lapses, session 2 re-claims: session 1, and a session the
// same worker opens afresh (say after its old one ended), are refused with
// conflict by heartbeat, complete, fail and release, and the todo stays session
// 2's, which acts without lease_seq. Both paths are walked: the verbs' own
// (fastCall) and mcp-go's.
func TestAckWithoutLeaseSeqOnlyFromTheClaimingSession(t *testing.T) {
	for _, fast := range []bool{true, false} {
		t.Run(map[bool]string{true: "fast path", false: "mcp-go"}[fast], func(t *testing.T) {
			e := newEnv(t)
			e.ag.fastOff.Store(!fast)
			_, cred := e.endpoint("pool", []string{"inbox"}, nil)
			first, second := e.dial(cred, false), e.dial(cred, false)
			before := e.ag.fastAnswered.Load()
			td := e.addTodo("inbox", "p")
			first.ok(t, VerbClaim, map[string]any{"todo_id": td.ID, "lease_ttl_seconds": 60}, nil)
			e.clock.Add(61 * time.Second)
			if res, err := reaper.New(e.st, reaper.Options{Logger: e.quiet}).RunOnce(t.Context()); err != nil || res.Requeued != 1 {
				t.Fatalf("reaper pass = %+v, %v; want 1 requeued", res, err)
			}
			var claim claimResult
			second.ok(t, VerbClaimNext, map[string]any{"lease_ttl_seconds": 600}, &claim)

			refused := func(c *agentClient, who string) {
				t.Helper()
				for _, verb := range []string{VerbHeartbeat, VerbComplete, VerbFail, VerbRelease} {
					args := map[string]any{"todo_id": td.ID}
					if verb == VerbFail {
						args["error"] = "late"
					}
					res, err := c.call(verb, args)
					var p errorPayload
					if err == nil && res.IsError {
						err = json.Unmarshal(res.RawStructuredContent, &p)
					}
					if err != nil || p.Code != CodeConflict {
						t.Errorf("%s from %s without lease_seq: %v %+v, want conflict", verb, who, err, p)
					}
					if fresh := who == "a fresh session"; fresh && !strings.Contains(p.Message, "pass lease_seq from your claim") {
						t.Errorf("%s from %s: message %q does not say to pass lease_seq", verb, who, p.Message)
					}
				}
			}
			refused(first, "the session that lost the lease")
			refused(e.dial(cred, false), "a fresh session")
			if got := e.todo(td.ID); got.State != store.StateClaimed || got.LeaseSeq != claim.LeaseSeq {
				t.Fatalf("after the refused calls the todo is %s under lease %d, want still claimed under %d", got.State, got.LeaseSeq, claim.LeaseSeq)
			}

			// The holder needs no lease_seq: its session made the claim.
			second.ok(t, VerbHeartbeat, map[string]any{"todo_id": td.ID}, nil)
			second.ok(t, VerbComplete, map[string]any{"todo_id": td.ID}, nil)
			if got := e.todo(td.ID); got.State != store.StateDone {
				t.Fatalf("the holder's complete left the todo %s", got.State)
			}
			if n := e.ag.fastAnswered.Load() - before; (n > 0) != fast {
				t.Fatalf("%d calls answered by the fast path, with it on: %v", n, fast)
			}
		})
	}
}

// A call outside any session (what a stateless request will be) has no claim on
// record: without lease_seq it is refused and told to pass it; with it, it acts.
func TestAckOutsideASessionNeedsLeaseSeq(t *testing.T) {
	e := newEnv(t)
	ep, _ := e.endpoint("stateless", []string{"inbox"}, nil)
	td, err := e.st.Claim(t.Context(), store.Ack{ID: e.addTodo("inbox", "p").ID, Owner: "agent:stateless"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	call := func(args string) error {
		_, err := e.ag.complete(t.Context(), &Call{Endpoint: ep, Actor: "agent:stateless", args: []byte(args)})
		return err
	}
	var refusal *Error
	if err := call(`{"todo_id":` + strconv.FormatInt(td.ID, 10) + `}`); !errors.As(err, &refusal) ||
		refusal.Code != CodeConflict || !strings.Contains(refusal.Message, "pass lease_seq from your claim") {
		t.Fatalf("complete outside a session without lease_seq: %v, want conflict saying to pass lease_seq", err)
	}
	if err := call(`{"todo_id":` + strconv.FormatInt(td.ID, 10) + `,"lease_seq":` + strconv.FormatInt(td.LeaseSeq, 10) + `}`); err != nil {
		t.Fatalf("complete outside a session with lease_seq: %v", err)
	}
}
