package ingest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/internal/testkit/teststore"
	"github.com/switchboardhq/switchboard/store"
)

// BenchmarkDelivery measures verified deliveries per second into durable todos
// (synchronous=FULL, real HTTP over loopback, a 4 KiB GitHub-signed body) with 1
// and with 32 concurrent senders, their p50/p99 latency, and the ratio to the
// disk's raw single-row commit rate (store.MeasureFloor), which is the figure that
// travels between machines. Deliveries alternate between two webhooks (ids 1 and
// 2 on the fresh database), as they do in `switchboard bench`: a statement whose
// plan SQLite ties to whether a bound id is 0 or 1 is re-prepared whenever the id
// changes to or from 1, which one webhook alone would never show.
//
//	go test ./ingest -run '^$' -bench Delivery -benchtime 2000x
func BenchmarkDelivery(b *testing.B) {
	ctx := context.Background()
	floor, err := store.MeasureFloor(ctx, filepath.Join(b.TempDir(), "floor.db"), store.Options{}, 2*time.Second)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("floor", func(b *testing.B) { b.ReportMetric(floor, "commits/s") })
	for _, senders := range []int{1, 32} {
		b.Run(fmt.Sprintf("senders=%d", senders), func(b *testing.B) {
			st := teststore.Open(b, store.Options{Synchronous: store.SyncFull})
			router := httprouter.New()
			router.Handler(http.MethodPost, Route, NewReceiver(st, ReceiverOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
			srv := httptest.NewServer(router)
			defer srv.Close()
			secret, _ := NewSecret("github")
			var urls []string
			for range 2 {
				hook, err := st.CreateWebhook(ctx, store.NewWebhook{SourceType: "github", Queue: "bench", Secret: secret, CreatedBy: "human:1"})
				if err != nil {
					b.Fatal(err)
				}
				urls = append(urls, URL(srv.URL, hook.Token))
			}
			client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
			padding := bytes.Repeat([]byte(`{"k":"v"},`), 4096/10)

			latencies := make([][]time.Duration, senders)
			per := (b.N + senders - 1) / senders
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for g := 0; g < senders; g++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					lat := make([]time.Duration, 0, per)
					for i := 0; i < per; i++ {
						// Each delivery its own body: the same one again is a replay.
						id := fmt.Sprintf("d-%d-%d", g, i)
						body := append([]byte(`{"delivery":"`+id+`"},`), padding...)
						h, _ := Sign("github", secret, id, body, time.Now())
						req, _ := http.NewRequest(http.MethodPost, urls[(g+i)%len(urls)], bytes.NewReader(body))
						req.Header = h
						t0 := time.Now()
						resp, err := client.Do(req)
						if err != nil {
							b.Error(err)
							return
						}
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						lat = append(lat, time.Since(t0))
						if resp.StatusCode != http.StatusAccepted {
							b.Errorf("status %d", resp.StatusCode)
							return
						}
					}
					latencies[g] = lat
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			all := slices.Concat(latencies...)
			slices.Sort(all)
			if len(all) == 0 {
				return
			}
			rate := float64(len(all)) / elapsed.Seconds()
			ws := st.WriterStats()
			b.ReportMetric(rate, "deliveries/s")
			b.ReportMetric(rate/floor, "x-floor")
			b.ReportMetric(ms(all[len(all)/2]), "p50-ms")
			b.ReportMetric(ms(all[len(all)*99/100]), "p99-ms")
			b.ReportMetric(float64(ws.Requests)/float64(max(ws.Batches, 1)), "writes/fsync")
			b.ReportMetric(ws.Busy.Seconds()/elapsed.Seconds(), "writer-busy")
			b.ReportMetric(float64(ws.Commit.Microseconds())/float64(max(ws.Batches, 1)), "commit-µs")
		})
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
