package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboardhq/switchboard/store"
)

// flowCollector reports, per queue, what flow control did: todos folded into a
// pending one, deliveries a webhook rule filtered out. The counts live in the
// database (store.QueueFlows), so they survive restarts and add up across
// processes.
type flowCollector struct{ st *store.Store }

var (
	coalescedDesc = prometheus.NewDesc("switchboard_todos_coalesced_total",
		"Todos folded into a pending todo of their key, by queue.", []string{"queue"}, nil)
	filteredDesc = prometheus.NewDesc("switchboard_deliveries_filtered_total",
		"Webhook deliveries recorded but dropped by a webhook rule (no todo), by queue.", []string{"queue"}, nil)
)

func (c *flowCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- coalescedDesc
	ch <- filteredDesc
}

func (c *flowCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	flows, err := c.st.QueueFlows(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(coalescedDesc, err)
		return
	}
	for _, f := range flows {
		ch <- prometheus.MustNewConstMetric(coalescedDesc, prometheus.CounterValue, float64(f.Coalesced), f.Queue)
		ch <- prometheus.MustNewConstMetric(filteredDesc, prometheus.CounterValue, float64(f.Filtered), f.Queue)
	}
}
