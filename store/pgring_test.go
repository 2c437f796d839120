package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/switchboardhq/switchboard/internal/testkit"
)

// listenRing listens on the switchboard channel as another process does, and
// returns the schema at url and a function giving the next ring's payload for
// it each time it is called (other tests' schemas share the channel).
func listenRing(t *testing.T, url string) (schema string, next func() string) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `LISTEN switchboard`); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	return schema, func() string {
		t.Helper()
		for {
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second) // a guard against a hang, not a timing
			n, err := conn.WaitForNotification(wctx)
			cancel()
			if err != nil {
				t.Fatalf("no ring: %v", err)
			}
			if strings.HasPrefix(n.Payload, ringPrefix+schema+"\n") {
				return n.Payload
			}
		}
	}
}

// Another process's add and return ring here from their notification's payload,
// and each is announced once, whether the ring or the scan comes first.
func TestRingAndScanAnnounceEachChangeOnce(t *testing.T) {
	ctx := context.Background()
	url := testkit.PostgresURL(t)
	serveSide, cli := openPair(t, url)
	schema, nextRing := listenRing(t, url)
	var rang []string
	serveSide.OnTodoChange(func(c TodoChange) { rang = append(rang, fmt.Sprintf("%s:%d", c.Cause, c.ID)) })
	watch, err := serveSide.newForeignWatch(ctx, serveSide.rdb)
	if err != nil {
		t.Fatal(err)
	}
	defer serveSide.own.stop()
	expect := func(when string, want ...string) {
		t.Helper()
		if fmt.Sprint(rang) != fmt.Sprint(want) {
			t.Fatalf("%s: rang %v, want %v", when, rang, want)
		}
		rang = nil
	}

	// The ring first: the scan after it announces nothing again.
	a, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if !serveSide.ringFrom(nextRing(), schema) {
		t.Fatal("the add's payload is not a ring")
	}
	expect("the add's ring", fmt.Sprintf("add:%d", a.ID))
	watch.check(ctx)
	expect("the scan after the ring")

	// The scan first: the late ring announces nothing again.
	b, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "b"})
	if err != nil {
		t.Fatal(err)
	}
	ringB := nextRing()
	watch.check(ctx)
	expect("the scan before the ring", fmt.Sprintf("add:%d", b.ID))
	serveSide.ringFrom(ringB, schema)
	expect("the ring after the scan")

	// A return to the queue rings from its payload too, once.
	claimed, err := cli.Claim(ctx, Ack{ID: a.ID, Owner: "agent:x"}, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Release(ctx, Ack{ID: a.ID, Owner: "agent:x", LeaseSeq: claimed.LeaseSeq}); err != nil {
		t.Fatal(err)
	}
	serveSide.ringFrom(nextRing(), schema)
	expect("the release's ring", fmt.Sprintf("release:%d", a.ID))
	watch.check(ctx)
	expect("the scan after the release's ring")
}

// A ring needs no round trip: it rings for the todo its payload names, though
// the scan would not find it, while the watch runs (and not when it does not);
// one naming another schema of the database (another Switchboard) does not ring.
func TestRingRingsFromThePayloadAlone(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	url := testkit.PostgresURL(t)
	serveSide, _ := openPair(t, url)
	rang := make(chan TodoChange, 10)
	serveSide.OnTodoChange(func(c TodoChange) { rang <- c })
	other, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close(context.Background())
	var schema string
	if err := other.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema); err != nil {
		t.Fatal(err)
	}
	ring := func(in string, id int) string {
		return fmt.Sprintf(`%s%s`+"\n"+`[{"i":%d,"q":"inbox","s":"cli","st":"pending","c":true,"w":"add"}]`, ringPrefix, in, id)
	}
	if serveSide.ringFrom(ring(schema, 987654), schema); len(rang) != 0 {
		t.Fatal("a ring rang with no watch running")
	}
	done := watchListening(ctx, t, serveSide)
	// In order on one connection: another schema's ring first.
	for _, r := range []string{ring(schema+"_other", 123456), ring(schema, 987654)} {
		if _, err := other.Exec(ctx, `SELECT pg_notify('switchboard', $1)`, r); err != nil {
			t.Fatal(err)
		}
	}
	select {
	case c := <-rang:
		if c.ID != 987654 || c.Queue != "inbox" || !c.Claimable || c.Cause != "add" {
			t.Fatalf("rang %+v", c)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the ring's payload never rang")
	}
	cancel()
	<-done
}

// A batch whose adds do not fit in a notification sends no ring: the scan
// announces them.
func TestRingPayloadFitsOrIsLeftOut(t *testing.T) {
	batch := func(n int) []*writeReq {
		r := &writeReq{}
		for i := range n {
			r.wtx.changes = append(r.wtx.changes, TodoChange{ID: int64(1000000 + i), Queue: "a-queue-name", Source: "generic",
				State: StatePending, Claimable: true, Cause: "add"})
		}
		r.wtx.changes = append(r.wtx.changes, TodoChange{ID: 1, Cause: "claim"})
		return []*writeReq{r}
	}
	small := ringPayload(batch(3))
	if !strings.HasPrefix(small, "[") || strings.Contains(small, `"claim"`) || strings.Count(small, `"add"`) != 3 {
		t.Fatalf("three adds and a claim: %q", small)
	}
	if big := ringPayload(batch(500)); big != "" {
		t.Fatalf("500 adds gave a ring of %d bytes", len(big))
	}
	if none := ringPayload(batch(0)); none != "" {
		t.Fatalf("a claim alone gave %q", none)
	}
}

// A ring for a decision on a todo awaiting approval rings as the decision did
// where it was made: now for the worker that asked, and again when the hold ends
// (not only then, as a retry's backoff does).
func TestRingOfAnApprovalRingsNowAndAtTheHoldsEnd(t *testing.T) {
	s := openTest(t, Options{})
	s.own.start()
	defer s.own.stop()
	_, expect := recordRings(t, s, func(c TodoChange) string { return fmt.Sprint(c.Cause, ":", c.ID) })
	hold := s.now().Add(ApprovalHold)
	payload := fmt.Sprintf(`%sits_schema`+"\n"+`[{"i":7,"q":"inbox","st":"pending","c":true,"at":%d,"w":"approval_decided","a":40}]`,
		ringPrefix, ms(hold))
	if !s.ringFrom(payload, "its_schema") {
		t.Fatal("the payload was not read as a ring")
	}
	expect("the ring of an approval", "approval_decided:7")
	s.wakeups.mu.Lock()
	at, timed := s.wakeups.latest[7]
	s.wakeups.mu.Unlock()
	if !timed || ms(at) != ms(hold) {
		t.Fatalf("the hold's end: %v (timed %v), want %v", at, timed, hold)
	}
}

// watchedPair is openPair with serveSide's watch begun (not run: a test rings
// by hand, with ringFrom) and a listener giving the rings in its schema.
func watchedPair(t *testing.T) (serveSide, cli *Store, schema string, nextRing func() string) {
	t.Helper()
	url := testkit.PostgresURL(t)
	serveSide, cli = openPair(t, url)
	schema, nextRing = listenRing(t, url)
	if _, err := serveSide.newForeignWatch(context.Background(), serveSide.rdb); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(serveSide.own.stop)
	return serveSide, cli, schema, nextRing
}

// A revocation through another process hands the agent's todos back, and its
// ring reaches this process before its watch has read the endpoints' epoch: the
// revoked agent, woken by that ring, must not get in with its credential and
// claim the todo its revocation gave back (the fleet's revoked worker did).
func TestRingAfterARevocationDoesNotLetTheRevokedCredentialIn(t *testing.T) {
	ctx := context.Background()
	serveSide, cli, schema, nextRing := watchedPair(t)
	ep, cred, err := cli.CreateEndpoint(ctx, "worker", EndpointSpec{Queues: &[]string{"inbox"}}, "human:1")
	if err != nil {
		t.Fatal(err)
	}
	a, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "a"})
	if err != nil {
		t.Fatal(err)
	}
	nextRing() // the add's
	if _, err := cli.Claim(ctx, Ack{ID: a.ID, Owner: "agent:worker"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	// The worker's session on this process looks its credential up at each call.
	if _, err := serveSide.EndpointByCredential(ctx, cred); err != nil {
		t.Fatal(err)
	}
	r, err := cli.RevokeEndpointReleasing(ctx, ep.ID, "human:1")
	if err != nil || r.Released != 1 {
		t.Fatalf("revoke: %+v, %v", r, err)
	}
	// The watch last looked just before the revocation's notification came.
	serveSide.creds.watched(time.Now())
	if !serveSide.ringFrom(nextRing(), schema) {
		t.Fatal("the revocation's payload is not a ring")
	}
	if _, err := serveSide.EndpointByCredential(ctx, cred); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the revoked credential after its revocation's ring: %v, want ErrNotFound", err)
	}
}

// A fold into a debounced todo in another process rings here from its payload
// as the add does: the wake-up timed for the add moves to the new end of the
// debounce, without waiting for the scan (which passes no new id for it).
func TestRingOfADebouncedFoldRetimesTheWakeUp(t *testing.T) {
	ctx := context.Background()
	serveSide, cli, schema, nextRing := watchedPair(t)
	debounced := TodoOptions{Key: "pr-1", Coalesce: true, Debounce: time.Hour}
	first, err := cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "a", Options: debounced})
	if err != nil {
		t.Fatal(err)
	}
	serveSide.ringFrom(nextRing(), schema)
	var folded Todo
	for folded.AvailableAt.Compare(first.AvailableAt) <= 0 {
		if folded, err = cli.AddTodo(ctx, NewTodo{Queue: "inbox", Payload: "b", Options: debounced}); err != nil {
			t.Fatal(err)
		}
		serveSide.ringFrom(nextRing(), schema)
	}
	serveSide.wakeups.mu.Lock()
	at := serveSide.wakeups.latest[first.ID]
	serveSide.wakeups.mu.Unlock()
	if ms(at) != ms(folded.AvailableAt) {
		t.Fatalf("the wake-up after the fold's ring: %v, want %v", at, folded.AvailableAt)
	}
}
