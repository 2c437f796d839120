package compare

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"
	"github.com/switchboardhq/switchboard/ingest"
	"github.com/switchboardhq/switchboard/store"
	"maragu.dev/goqite"
)

// senders is the number of concurrent webhook senders, as in `switchboard bench`.
const senders = 32

// BenchmarkIngest: 32 senders post b.N GitHub-signed ~2 KB deliveries over loopback
// HTTP, each answered once it is durable. Switchboard's receiver (verify, dedupe by
// delivery id, store the event and its todo, audit) against the handler one would
// write in front of goqite: read the body, check X-Hub-Signature-256, Send.
func BenchmarkIngest(b *testing.B) {
	secret, err := ingest.NewSecret("github")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("switchboard", func(b *testing.B) { ingestSwitchboard(b, openSwitchboard(b), sqliteFloor, secret) })
	for _, d := range drivers {
		b.Run("goqite-"+d.name, func(b *testing.B) {
			q, db := openGoqite(b, d)
			srv := httptest.NewServer(goqiteHandler(q, secret))
			defer srv.Close()
			send(b, sqliteFloor, srv.URL+"/webhooks/github", secret)
			wantRows(b, db, "goqite", b.N)
		})
	}
}

// ingestSwitchboard is the switchboard line of BenchmarkIngest on st: a GitHub
// webhook on the bench queue, Switchboard's receiver behind real HTTP, b.N
// deliveries sent, and as many pending todos afterwards.
func ingestSwitchboard(b *testing.B, st *store.Store, floor *measuredFloor, secret string) {
	b.Helper()
	hook, err := st.CreateWebhook(context.Background(), store.NewWebhook{SourceType: "github", Queue: "bench", Secret: secret, CreatedBy: "human:1"})
	if err != nil {
		b.Fatal(err)
	}
	router := httprouter.New()
	router.Handler(http.MethodPost, ingest.Route, ingest.NewReceiver(st, ingest.ReceiverOptions{Logger: quietLogger()}))
	srv := httptest.NewServer(router)
	defer srv.Close()
	send(b, floor, ingest.URL(srv.URL, hook.Token), secret)
	wantPending(b, st, b.N)
}

// wantPending fails b unless st's bench queue holds n pending todos.
func wantPending(b *testing.B, st *store.Store, n int) {
	b.Helper()
	counts, err := st.QueueCounts(context.Background())
	var pending int64
	for _, c := range counts {
		if c.Queue == "bench" && c.State == "pending" {
			pending = c.Count
		}
	}
	if err != nil || pending != int64(n) {
		b.Fatalf("switchboard holds %d pending todos after %d deliveries (%v)", pending, n, err)
	}
}

// handRolled is the careful receiver one would write in front of a queue library:
// a bounded body, the GitHub signature checked in constant time before anything is
// stored, and 202 once store has committed.
func handRolled(secret string, store func(ctx context.Context, body []byte) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 1<<20))
		if err != nil {
			http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
			return
		}
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
		if !hmac.Equal([]byte(want), []byte(r.Header.Get("X-Hub-Signature-256"))) {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		if err := store(r.Context(), body); err != nil {
			http.Error(w, "not stored", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
}

// goqiteHandler is handRolled with goqite's Send.
func goqiteHandler(q *goqite.Queue, secret string) http.Handler {
	return handRolled(secret, func(ctx context.Context, body []byte) error {
		return q.Send(ctx, goqite.Message{Body: body})
	})
}

// send posts b.N signed deliveries to url from 32 senders and reports deliveries
// per second (and its ratio to the floor) and the p50/p99 of their answers.
func send(b *testing.B, floor *measuredFloor, url, secret string) {
	b.Helper()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
	defer client.CloseIdleConnections()
	latencies := make([][]time.Duration, senders)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []string
	)
	b.ResetTimer()
	start := time.Now()
	for g := range senders {
		n := b.N / senders
		if g < b.N%senders {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, n)
			defer func() { latencies[g] = lat }()
			for i := range n {
				// Each delivery its own body, as a producer's are: GitHub signs no
				// delivery id, so a body sent again is a replay, whatever its id.
				id := fmt.Sprintf("d-%d-%d", g, i)
				body := []byte(`{"delivery":"` + id + `",` + payload[1:])
				h, err := ingest.Sign("github", secret, id, body, time.Now())
				if err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
					return
				}
				req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
				req.Header = h
				req.Header.Set("Content-Type", "application/json")
				t0 := time.Now()
				resp, err := client.Do(req)
				if err == nil {
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, err.Error())
					mu.Unlock()
					return
				}
				lat = append(lat, time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if len(errs) > 0 {
		b.Fatalf("%d senders failed; first: %s", len(errs), strings.Join(errs[:1], ""))
	}
	var all []time.Duration
	for _, l := range latencies {
		all = append(all, l...)
	}
	p50, p99 := percentiles(all)
	floor.report(b, float64(len(all))/elapsed.Seconds())
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
}
