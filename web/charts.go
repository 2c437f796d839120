package web

import (
	"fmt"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The charts are SVG drawn here, from the minutes the store keeps (see
// store.ChartSampler): no script, no chart library, nothing the CSP must allow.
// Colours come from classes in charts.css, so they follow the theme.

// chartRange is the span a chart shows and how much of it each point sums up.
type chartRange struct {
	Name, Label, Per string // the ?range= value; "Last hour"; "per minute"
	Span, Step       time.Duration
	ago              func(time.Duration) string // an x-axis label
}

var chartRanges = []chartRange{
	{Name: "1h", Label: "Last hour", Per: "per minute", Span: time.Hour, Step: time.Minute,
		ago: func(d time.Duration) string { return fmt.Sprintf("−%dm", int(d.Minutes())) }},
	{Name: "24h", Label: "Last day", Per: "per 15 minutes", Span: 24 * time.Hour, Step: 15 * time.Minute,
		ago: func(d time.Duration) string { return fmt.Sprintf("−%dh", int(d.Hours())) }},
}

// pickRange is the ?range= asked for, or the last hour.
func pickRange(r *http.Request) chartRange {
	asked := r.URL.Query().Get("range")
	for _, cr := range chartRanges {
		if cr.Name == asked {
			return cr
		}
	}
	return chartRanges[0]
}

// chartPanel is a titled row of charts with the range links.
type chartPanel struct {
	Title  string
	Ranges []rangeLink
	Charts []chartView
	// LiveURL serves the panel alone: the page script refetches it every 30 s,
	// not on every todo change, as its minutes move only once a minute.
	LiveURL string
}

type rangeLink struct {
	Label, URL string
	Current    bool
}

// link fills in the panel's range links and its LiveURL; url builds a link to the
// page with the given ?range= and ?fragment=.
func (p *chartPanel) link(cur chartRange, url func(rng, fragment string) string) {
	for _, cr := range chartRanges {
		p.Ranges = append(p.Ranges, rangeLink{Label: cr.Label, URL: url(cr.param(), ""), Current: cr.Name == cur.Name})
	}
	p.LiveURL = url(cur.param(), "charts")
}

// param is the range's ?range= value: none for the default, so links stay short.
func (cr chartRange) param() string {
	if cr.Name == chartRanges[0].Name {
		return ""
	}
	return cr.Name
}

// boardCharts fills in the charts of the board's queue (or of all queues).
func (u *UI) boardCharts(w http.ResponseWriter, r *http.Request, rc *reqCtx, p *boardPage) bool {
	rng := pickRange(r)
	panel, err := u.queueCharts(r, p.Queue, rng)
	if err != nil {
		u.storeError(w, r, rc, "Reading the charts", err)
		return false
	}
	panel.link(rng, func(rng, fragment string) string {
		return link("/", "queue", p.Queue, "state", p.State, "range", rng, "fragment", fragment)
	})
	p.Charts = &panel
	return true
}

// queueCharts draws a queue's charts (queue "": all queues) over r.
func (u *UI) queueCharts(req *http.Request, queue string, r chartRange) (chartPanel, error) {
	c := u.frame(r, "Nothing recorded in the ")
	minutes, err := u.store.QueueMinutes(req.Context(), queue, c.start)
	if err != nil {
		return chartPanel{}, err
	}
	n := c.points()
	added, completed, failed := make([]float64, n), make([]float64, n), make([]float64, n)
	depth, wait := make([]float64, n), make([]float64, n)
	for _, m := range minutes {
		i := c.point(m.Minute)
		if i < 0 {
			continue
		}
		added[i] += float64(m.Added)
		completed[i] += float64(m.Completed)
		failed[i] += float64(m.Failed)
		depth[i] = max(depth[i], float64(m.Depth))
		wait[i] = max(wait[i], m.OldestWait.Seconds())
	}
	on := " on " + queue
	if queue == "" {
		on = " on every queue"
	}
	c.empty = len(minutes) == 0
	flow := c.draw("Todos "+r.Per, on, counts, []series{
		{name: "added", class: "s-added", vals: added, total: true},
		{name: "completed", class: "s-done", vals: completed, total: true},
		{name: "failed", class: "s-failed", vals: failed, total: true},
	})
	pending := c.draw("Pending", on, counts, []series{{name: "pending", class: "s-pending", vals: depth, area: true}})
	oldest := c.draw("Oldest pending waited", on, waits, []series{{name: "waited", class: "s-wait", vals: wait}})
	title := "All queues"
	if queue != "" {
		title = queue
	}
	return chartPanel{Title: title, Charts: []chartView{flow, pending, oldest}}, nil
}

// webhookCharts is the chart of webhook id's traffic, for its page.
func (u *UI) webhookCharts(w http.ResponseWriter, r *http.Request, rc *reqCtx, id int64) (*chartPanel, bool) {
	rng := pickRange(r)
	panel, err := u.webhookChart(r, id, rng)
	if err != nil {
		u.storeError(w, r, rc, "Reading the chart", err)
		return nil, false
	}
	panel.link(rng, func(rng, fragment string) string {
		return link(fmt.Sprintf("/webhook/%d", id), "range", rng, "fragment", fragment)
	})
	return &panel, true
}

// webhookChart draws a webhook's deliveries and refusals over r.
func (u *UI) webhookChart(req *http.Request, id int64, r chartRange) (chartPanel, error) {
	c := u.frame(r, "No deliveries or refusals in the ")
	minutes, err := u.store.WebhookMinutes(req.Context(), id, c.start)
	if err != nil {
		return chartPanel{}, err
	}
	deliveries, refusals := make([]float64, c.points()), make([]float64, c.points())
	for _, m := range minutes {
		if i := c.point(m.Minute); i >= 0 {
			deliveries[i] += float64(m.Deliveries)
			refusals[i] += float64(m.Refusals)
		}
	}
	c.empty = len(minutes) == 0
	v := c.draw("Deliveries "+r.Per, fmt.Sprintf(" to webhook #%d", id), counts, []series{
		{name: "stored", class: "s-added", vals: deliveries, total: true},
		{name: "refused", class: "s-failed", vals: refusals, total: true},
	})
	return chartPanel{Title: "Traffic", Charts: []chartView{v}}, nil
}

// series is one line of a chart: a value per point.
type series struct {
	name, class string
	vals        []float64
	total       bool // the key shows the sum (counts); else the peak
	area        bool // filled below the line
}

// chartView is one drawn chart, every number already formatted for the SVG.
type chartView struct {
	Title, Summary string
	Empty          bool
	EmptyText      string
	Keys           []chartKey
	Paths          []chartPath
	Grid           []chartTick
	XTicks         []chartTick
	Cols           []chartCol
	W, H           int
	Left, Right    int // the plot's edges
	Top, Bottom    int
	PlotH, LabelY  int // the plot's height; the x axis labels' baseline
	MidX, MidY     int
}

type chartKey struct{ Name, Class, Value string }
type chartPath struct{ Class, D string }
type chartTick struct{ Pos, Label, Anchor string }
type chartCol struct{ X, W, Title string }

// The SVG's coordinate space; it scales to the width it is given.
const (
	chartW, chartH        = 360, 150
	chartLeft, chartRight = 38, 352
	chartTop, chartBottom = 8, 128
	chartLabelY           = 144
)

// chartFrame is what a panel's charts share: their range and its start.
type chartFrame struct {
	r         chartRange
	start     time.Time
	empty     bool   // nothing recorded in the range
	emptyText string // what the charts then say
}

// frame is the frame over r that ends with the last whole minute. With nothing
// recorded in it, its charts say nothing and the range ("… in the last hour").
func (u *UI) frame(r chartRange, nothing string) chartFrame {
	end := u.now().Truncate(time.Minute)
	return chartFrame{r: r, start: end.Add(-r.Span), emptyText: nothing + strings.ToLower(r.Label)}
}

func (c chartFrame) points() int { return int(c.r.Span / c.r.Step) }

// point is the index of the point the minute starting at t falls in; -1 outside.
func (c chartFrame) point(t time.Time) int {
	if i := int(t.Sub(c.start) / c.r.Step); t.Compare(c.start) >= 0 && i < c.points() {
		return i
	}
	return -1
}

// axis formats a chart's values and rounds its scale.
type axis struct {
	// format writes a value for the y axis (short) or a key and a tooltip.
	format func(v float64, short bool) string
	// ceil is the round number the y axis ends at, at or above the peak.
	ceil func(peak float64) float64
}

// counts: 1, 2, 4, 6, 8 or 10 times a power of ten, whose halves are whole.
var counts = axis{
	format: func(v float64, short bool) string {
		switch {
		case !short:
			return thousands(int64(v))
		case v >= 1e6:
			return strconv.FormatFloat(v/1e6, 'f', -1, 64) + "M"
		case v >= 1e3:
			return strconv.FormatFloat(v/1e3, 'f', -1, 64) + "k"
		}
		return strconv.FormatFloat(v, 'f', -1, 64)
	},
	ceil: func(peak float64) float64 {
		if peak <= 1 {
			return 1
		}
		pow := math.Pow(10, math.Floor(math.Log10(peak)))
		for _, m := range []float64{1, 2, 4, 6, 8} {
			if peak <= m*pow {
				return m * pow
			}
		}
		return 10 * pow
	},
}

// waits, in seconds: a round duration, a minute at least.
var waits = axis{
	format: func(v float64, _ bool) string { return spell(time.Duration(v * float64(time.Second))) },
	ceil: func(peak float64) float64 {
		for _, s := range []float64{60, 120, 300, 600, 1200, 1800, 3600, 7200, 4 * 3600, 6 * 3600, 12 * 3600, 24 * 3600} {
			if peak <= s {
				return s
			}
		}
		return math.Ceil(peak/86400) * 86400
	},
}

// spell writes a duration in its two largest units: "45s", "2m 30s", "3h 5m".
func spell(d time.Duration) string {
	d = d.Round(time.Second)
	units := []struct {
		d    time.Duration
		name string
	}{{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}}
	for i, u := range units {
		if d < u.d {
			continue
		}
		s := strconv.FormatInt(int64(d/u.d), 10) + u.name
		if i+1 < len(units) {
			if rest := (d % u.d) / units[i+1].d; rest > 0 {
				s += " " + strconv.FormatInt(int64(rest), 10) + units[i+1].name
			}
		}
		return s
	}
	return "0s"
}

// draw lays series out over the frame's points: a shared y scale from zero to a
// round number at or above the largest value, points at their slot's middle.
func (c chartFrame) draw(title, on string, ax axis, ss []series) chartView {
	v := chartView{Title: title, Empty: c.empty, EmptyText: c.emptyText, W: chartW, H: chartH,
		Left: chartLeft, Right: chartRight, Top: chartTop, Bottom: chartBottom,
		PlotH: chartBottom - chartTop, LabelY: chartLabelY, MidX: (chartLeft + chartRight) / 2, MidY: (chartTop + chartBottom) / 2}
	peak := 0.0
	for _, s := range ss {
		peak = max(peak, peakOf(s.vals))
	}
	top := ax.ceil(peak)
	n := len(ss[0].vals)
	slot := float64(chartRight-chartLeft) / float64(n)
	xAt := func(i int) float64 { return chartLeft + (float64(i)+0.5)*slot }
	yAt := func(x float64) float64 { return chartBottom - x/top*(chartBottom-chartTop) }
	for _, t := range []float64{0, top / 2, top} {
		v.Grid = append(v.Grid, chartTick{Pos: coord(yAt(t)), Label: ax.format(t, true)})
	}
	for q := 0; q <= 4; q++ {
		back := c.r.Span * time.Duration(4-q) / 4
		label, anchor := c.r.ago(back), "middle"
		switch q {
		case 0:
			anchor = "start"
		case 4:
			label, anchor = "now", "end"
		}
		v.XTicks = append(v.XTicks, chartTick{Pos: coord(chartLeft + float64(q)/4*(chartRight-chartLeft)), Label: label, Anchor: anchor})
	}
	var said []string
	for _, s := range ss {
		key := chartKey{Name: s.name, Class: s.class}
		if s.total {
			sum := 0.0
			for _, x := range s.vals {
				sum += x
			}
			key.Value = ax.format(sum, false)
			said = append(said, key.Value+" "+s.name)
		} else {
			key.Name, key.Value = "peak", ax.format(peakOf(s.vals), false)
			said = append(said, "at most "+key.Value)
		}
		v.Keys = append(v.Keys, key)
		if c.empty {
			continue
		}
		pts := make([]string, n)
		for i, x := range s.vals {
			pts[i] = coord(xAt(i)) + " " + coord(yAt(x))
		}
		line := strings.Join(pts, " L")
		if s.area {
			v.Paths = append(v.Paths, chartPath{Class: "area " + s.class,
				D: fmt.Sprintf("M%s %d L%s L%s %dZ", coord(xAt(0)), chartBottom, line, coord(xAt(n-1)), chartBottom)})
		}
		v.Paths = append(v.Paths, chartPath{Class: "line " + s.class, D: "M" + line})
	}
	v.Summary = fmt.Sprintf("%s%s, %s: %s.", title, on, strings.ToLower(c.r.Label), strings.Join(said, ", "))
	if !c.empty {
		v.Cols = c.columns(ss, ax, slot)
	}
	return v
}

// columns are the chart's hover targets: one per point, titled with its values.
func (c chartFrame) columns(ss []series, ax axis, slot float64) []chartCol {
	cols := make([]chartCol, len(ss[0].vals))
	for i := range cols {
		from := c.start.Add(time.Duration(i) * c.r.Step).UTC()
		when := from.Format("15:04")
		if c.r.Step > time.Minute {
			when += "–" + from.Add(c.r.Step).Format("15:04")
		}
		var vals []string
		for _, s := range ss {
			vals = append(vals, ax.format(s.vals[i], false)+" "+s.name)
		}
		cols[i] = chartCol{X: coord(chartLeft + float64(i)*slot), W: coord(slot),
			Title: when + " UTC: " + strings.Join(vals, ", ")}
	}
	return cols
}

func peakOf(vals []float64) float64 {
	p := 0.0
	for _, x := range vals {
		p = max(p, x)
	}
	return p
}

// coord writes an SVG coordinate with one decimal.
func coord(x float64) string { return strconv.FormatFloat(x, 'f', 1, 64) }
