package bench

import (
	"context"
	"fmt"
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

// sendAll posts n signed deliveries from senders goroutines, each on a connection
// of its own (see wire) to one of bases (round robin), each delivery bounded by
// timeout; with a gap, the deliveries are spread so that one starts every gap (an
// open-loop pace). A failed delivery is counted in errs; one that timed out stops
// every sender, and is sendAll's error: the server has stopped answering. Every
// hook is on the first of bases, and the same path on every other.
func sendAll(ctx context.Context, timeout time.Duration, hooks []webhook, bases []string, cfg Config, n, senders int, seq *atomic.Int64,
	lat *Latencies, errs *failures, gap time.Duration) error {
	parent := ctx
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stalled atomic.Pointer[error]
	var next atomic.Int64
	start := time.Now()
	pad := strings.Repeat("x", max(0, cfg.BodyBytes-160))
	paths := make([]string, len(hooks))
	for i, h := range hooks {
		p, err := requestPath(h.url)
		if err != nil {
			return err
		}
		paths[i] = p
	}
	var wg sync.WaitGroup
	for g := 0; g < senders; g++ {
		u, err := senderURL(hooks[0].url, bases, g)
		if err != nil {
			return err
		}
		w, err := newWire(u, timeout)
		if err != nil {
			return err
		}
		defer w.close()
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
				k := int(i) % len(hooks)
				h := hooks[k]
				id := "bench-" + strconv.FormatInt(seq.Add(1), 10) + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
				body := []byte(`{"id":"` + id + `","action":"opened","number":` + strconv.FormatInt(i, 10) +
					`,"padding":"` + pad + `"}`)
				t0 := time.Now()
				if err := deliver(ctx, w, h, paths[k], id, body); err != nil {
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
		return errNoAnswer("a delivery", timeout, *err)
	}
	return nil
}

// signed is the headers of a delivery of body to h with id, signed now.
func signed(h webhook, id string, body []byte) (http.Header, error) {
	hdr, err := ingest.Sign(h.source, h.secret, id, body, time.Now())
	if err != nil {
		return nil, err
	}
	hdr.Set("Content-Type", "application/json")
	if h.source == "generic" {
		hdr.Set("X-Delivery-Id", id)
	}
	return hdr, nil
}

// deliver posts one signed delivery of body to h, at path on w's server.
func deliver(ctx context.Context, w *wire, h webhook, path, id string, body []byte) error {
	hdr, err := signed(h, id, body)
	if err != nil {
		return err
	}
	pairs := make([]string, 0, 2*len(hdr))
	for k, vs := range hdr {
		for _, v := range vs {
			pairs = append(pairs, k, v)
		}
	}
	resp, _, err := w.do(ctx, http.MethodPost, path, pairs, body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("delivery answered %d", resp.StatusCode)
	}
	return nil
}
