package ingest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/julienschmidt/httprouter"

	"github.com/switchboardhq/switchboard/internal/testkit"
	"github.com/switchboardhq/switchboard/internal/testkit/teststore"
	"github.com/switchboardhq/switchboard/store"
)

// BenchmarkDeliveryBurst compares, in one run, the ingest rate of bursts of
// 1,000 GitHub-signed deliveries (32 senders, real HTTP) to a webhook without
// rules and to one whose rules key them all to one pull request and coalesce:
// rounds alternate between the two, and the ratio of the medians is reported
// (coalesced/plain; 1 = as fast), and of the process's CPU per delivery
// (senders and server together; on a busy machine it moves far less than the
// rate). Each coalesced burst must leave one pending todo.
//
//	go test ./ingest -run '^$' -bench DeliveryBurst -benchtime 1x
func BenchmarkDeliveryBurst(b *testing.B) {
	const burst, senders, rounds = 1000, 32, 6
	ctx := context.Background()
	st := teststore.Open(b, store.Options{Synchronous: store.SyncFull})
	router := httprouter.New()
	router.Handler(http.MethodPost, Route, NewReceiver(st, ReceiverOptions{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}))
	srv := httptest.NewServer(router)
	defer srv.Close()
	secret, _ := NewSecret("github")
	plain, err := st.CreateWebhook(ctx, store.NewWebhook{SourceType: "github", Queue: "plain", Secret: secret, CreatedBy: "human:1"})
	if err != nil {
		b.Fatal(err)
	}
	keyed, err := st.CreateWebhook(ctx, store.NewWebhook{SourceType: "github", Queue: "keyed", Secret: secret, CreatedBy: "human:1",
		Rules: []byte(`{"key":"{/repository/full_name}#{/number}","coalesce":true}`)})
	if err != nil {
		b.Fatal(err)
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: senders}}
	padding := bytes.Repeat([]byte(`{"k":"v"},`), 4096/10)
	send := func(url, tag string) (rate, cpuPer float64) {
		var wg sync.WaitGroup
		start, cpu := time.Now(), testkit.ProcessCPU(b)
		for g := 0; g < senders; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < burst; i += senders {
					id := fmt.Sprintf("%s-%d", tag, i)
					body := append([]byte(`{"repository":{"full_name":"octo/repo"},"number":42,"delivery":"`+id+`","pad":[`),
						append(padding, []byte(`{}]}`)...)...)
					h, _ := Sign("github", secret, id, body, time.Now())
					req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
					req.Header = h
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusAccepted {
						b.Errorf("status %d", resp.StatusCode)
						return
					}
				}
			}()
		}
		wg.Wait()
		return burst / time.Since(start).Seconds(), float64((testkit.ProcessCPU(b) - cpu).Microseconds()) / burst
	}
	var plainRates, keyedRates, plainCPU, keyedCPU []float64
	for n := 0; n < b.N; n++ {
		for r := 0; r < rounds; r++ {
			rate, cpu := send(URL(srv.URL, plain.Token), fmt.Sprintf("p%d-%d", n, r))
			plainRates, plainCPU = append(plainRates, rate), append(plainCPU, cpu)
			rate, cpu = send(URL(srv.URL, keyed.Token), fmt.Sprintf("k%d-%d", n, r))
			keyedRates, keyedCPU = append(keyedRates, rate), append(keyedCPU, cpu)
			todos, err := st.ListTodos(ctx, store.TodoFilter{Queues: []string{"keyed"}})
			if err != nil || len(todos) != 1 || todos[0].State != store.StatePending {
				b.Fatalf("after a coalesced burst: %d todos (%v), want one pending", len(todos), err)
			}
		}
	}
	p, k := median(plainRates), median(keyedRates)
	b.ReportMetric(p, "plain-deliveries/s")
	b.ReportMetric(k, "coalesced-deliveries/s")
	b.ReportMetric(k/p, "coalesced/plain")
	pc, kc := median(plainCPU), median(keyedCPU)
	b.ReportMetric(pc, "plain-cpu-µs/delivery")
	b.ReportMetric(kc, "coalesced-cpu-µs/delivery")
	b.ReportMetric(kc/pc, "coalesced/plain-cpu")
}

func median(v []float64) float64 {
	slices.Sort(v)
	return v[len(v)/2]
}
