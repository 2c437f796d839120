package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard/ingest"
)

// ingestURL is the advertised ingest URL's /webhooks/… path on base, the URL
// bench was given (which already carries any path prefix a proxy adds).
func ingestURL(base, advertised string) (string, error) {
	u, err := url.Parse(advertised)
	if err != nil {
		return "", fmt.Errorf("ingest_url %q: %w", advertised, err)
	}
	i := strings.Index(u.EscapedPath(), "/webhooks/")
	if i < 0 {
		return "", fmt.Errorf("ingest_url %q has no /webhooks/ path", advertised)
	}
	return strings.TrimSuffix(base, "/") + u.EscapedPath()[i:], nil
}

// sendAll posts n signed deliveries from senders goroutines; with a gap, the
// deliveries are spread so that one starts every gap (an open-loop pace). A failed
// delivery is counted in errs; one that timed out stops every sender, and is
// sendAll's error: the server has stopped answering.
func sendAll(ctx context.Context, c *http.Client, hooks []webhook, cfg Config, n, senders int, seq *atomic.Int64,
	lat *Latencies, errs *failures, gap time.Duration) error {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Pointer[error]
	var next atomic.Int64
	start := time.Now()
	pad := strings.Repeat("x", max(0, cfg.BodyBytes-160))
	var wg sync.WaitGroup
	for g := 0; g < senders; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				if gap > 0 {
					if wait := time.Until(start.Add(time.Duration(i) * gap)); wait > 0 {
						time.Sleep(wait)
					}
				}
				h := hooks[int(i)%len(hooks)]
				id := "bench-" + strconv.FormatInt(seq.Add(1), 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
				body := []byte(`{"id":"` + id + `","action":"opened","number":` + strconv.FormatInt(i, 10) +
					`,"padding":"` + pad + `"}`)
				t0 := time.Now()
				if err := deliver(ctx, c, h, id, body); err != nil {
					if ctx.Err() != nil && stalled.Load() != nil {
						return // another sender's delivery timed out
					}
					errs.add(err)
					if stalledCall(parent, err) {
						stalled.CompareAndSwap(nil, &err)
						cancel()
						return
					}
					continue
				}
				lat.Add(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	if err := stalled.Load(); err != nil {
		return errNoAnswer("a delivery", c.Timeout, *err)
	}
	return nil
}

func deliver(ctx context.Context, c *http.Client, h webhook, id string, body []byte) error {
	hdr, err := ingest.Sign(h.source, h.secret, id, body, time.Now())
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = hdr
	req.Header.Set("Content-Type", "application/json")
	if h.source == "generic" {
		req.Header.Set("X-Delivery-Id", id)
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("delivery answered %d", resp.StatusCode)
	}
	if err != nil {
		return fmt.Errorf("read the delivery's answer: %w", err)
	}
	return nil
}
