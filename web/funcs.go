package web

import (
	"errors"
	"fmt"
	"html/template"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/pretty"
	"github.com/switchboardhq/switchboard/internal/textcut"
	"github.com/switchboardhq/switchboard/store"
)

func errorsIs(err, target error) bool { return errors.Is(err, target) }

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// funcs are the template helpers. They close over the UI's clock and assets.
func (u *UI) funcs() template.FuncMap {
	return template.FuncMap{
		"asset": func(name string) string { return u.assets.url(name) },
		"ago":   func(t time.Time) string { return relative(u.now(), t, false) },
		// waited says how long since t, without "ago": "12s", "3h 5m".
		"waited": func(t time.Time) string {
			if u.now().Sub(t) < time.Second {
				return "under 1s"
			}
			return strings.TrimSuffix(relative(u.now(), t, false), " ago")
		},
		// stuck: a queue's head has waited longer than an agent draining it would let it.
		"stuck": func(t time.Time) bool { return u.now().Sub(t) > headStuck },
		"until": func(t *time.Time) string {
			if t == nil {
				return ""
			}
			return relative(u.now(), *t, true)
		},
		"expired": func(t *time.Time) bool { return t != nil && !t.After(u.now()) },
		"deref": func(t *time.Time) time.Time {
			if t == nil {
				return time.Time{}
			}
			return *t
		},
		"future":    func(t time.Time) bool { return t.After(u.now()) },
		"iso":       func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"stamp":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
		"size":      byteSize,
		"count":     thousands,
		"add1":      func(n int) int { return n + 1 },
		"join":      strings.Join,
		"clip":      clip,
		"has":       func(list []string, v string) bool { return contains(list, v) },
		"pretty":    pretty.Format,
		"defdiff":   definitionDiff,
		"target":    targetURL,
		"link":      link,
		"errorLink": errorLink,
		// quote writes a string for a form field that must come back exactly (see
		// retryDeadLetters).
		"quote":   strconv.Quote,
		"pct":     func(n, total int64) string { return percent(n, total) },
		"offset":  func(parts ...int64) string { return percent(sum(parts[:len(parts)-1]), parts[len(parts)-1]) },
		"browser": browserName,
		// webhooks says whether an endpoint's agent may create webhooks, and
		// under what ceiling.
		"webhooks": agent.WebhookGrant,
		"who":      u.who,
		"states": func() []string {
			return []string{store.StatePending, store.StateClaimed, store.StateFailed, store.StateDone}
		},
	}
}

// relative renders t against now as "12s ago" or "in 4m". precise keeps seconds up
// to ten minutes away ("in 4m 10s"), for lease expiries.
func relative(now, t time.Time, precise bool) string {
	d := t.Sub(now)
	suffix, prefix := "", "in "
	if d < 0 {
		d, suffix, prefix = -d, " ago", ""
	}
	var s string
	switch {
	case d < time.Second:
		return "just now"
	case d < time.Minute:
		s = fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 10*time.Minute && precise:
		s = fmt.Sprintf("%dm %ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < time.Hour:
		s = fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		s = fmt.Sprintf("%dh %dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		s = fmt.Sprintf("%dd", int(d.Hours()/24))
	}
	return prefix + s + suffix
}

// thousands writes a count with thousands separators, "300,229", so a busy queue's
// numbers read at a glance.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	for i, d := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(d)
	}
	return b.String()
}

func byteSize(n int) string {
	switch {
	case n < 1024:
		return strconv.Itoa(n) + " B"
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/1024)
	default:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	}
}

// targetURL links an audit target ("todo:7", "endpoint:3") to its page.
func targetURL(target string) string {
	kind, id, ok := strings.Cut(target, ":")
	if !ok {
		return ""
	}
	if _, err := strconv.ParseInt(id, 10, 64); err != nil {
		return ""
	}
	switch kind {
	case "todo":
		return "/todos/" + id
	case "endpoint":
		return "/endpoints/" + id
	case "webhook":
		return "/webhook/" + id
	case "webhook_event":
		return "/events/" + id
	}
	return ""
}

// link builds path?k=v&… leaving out empty values, for filter and paging links.
func link(path string, kv ...any) string {
	q := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v := fmt.Sprint(kv[i+1])
		if v == "" || v == "0" {
			continue
		}
		q.Set(fmt.Sprint(kv[i]), v)
	}
	if len(q) == 0 {
		return path
	}
	return path + "?" + q.Encode()
}

// errorLink is link with error=e added, even when e is "" or "0", which link leaves
// out: the board's filter on one last error, which may be either.
func errorLink(e, path string, kv ...any) string {
	base, query, _ := strings.Cut(link(path, kv...), "?")
	q, _ := url.ParseQuery(query) // link's own encoding: it parses
	q.Set("error", e)
	return base + "?" + q.Encode()
}

func percent(n, total int64) string {
	if total <= 0 {
		return "0"
	}
	return strconv.FormatFloat(float64(n)*100/float64(total), 'f', 2, 64)
}

func sum(v []int64) int64 {
	var t int64
	for _, x := range v {
		t += x
	}
	return t
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// queueSummary is one queue's counts by state.
type queueSummary struct {
	Queue                          string
	Pending, Claimed, Done, Failed int64
	// HeadSince is when the todo claim_next takes next became claimable; zero
	// when none is (see store.QueueHead).
	HeadSince time.Time
	// PausedBy is who paused the queue, "" when it runs; Awaiting counts its
	// todos awaiting approval (see control.go).
	PausedBy string
	Awaiting int64
}

// headStuck is how long a queue's head may wait before its card says so in red:
// long enough for an agent that drains on a schedule, or a human-paced queue.
const headStuck = 15 * time.Minute

// Total counts every todo of the queue.
func (q queueSummary) Total() int64 { return q.Pending + q.Claimed + q.Done + q.Failed }

// Count returns the count for a state name.
func (q queueSummary) Count(state string) int64 {
	switch state {
	case store.StatePending:
		return q.Pending
	case store.StateClaimed:
		return q.Claimed
	case store.StateDone:
		return q.Done
	case store.StateFailed:
		return q.Failed
	}
	return q.Total()
}

// summarise folds per-state counts into one row per queue, sorted by queue name.
func summarise(counts []store.QueueCount) []queueSummary {
	index := map[string]int{}
	out := []queueSummary{}
	for _, c := range counts {
		i, ok := index[c.Queue]
		if !ok {
			i = len(out)
			index[c.Queue] = i
			out = append(out, queueSummary{Queue: c.Queue})
		}
		s := &out[i]
		switch c.State {
		case store.StatePending:
			s.Pending += c.Count
		case store.StateClaimed:
			s.Claimed += c.Count
		case store.StateDone:
			s.Done += c.Count
		case store.StateFailed:
			s.Failed += c.Count
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Queue < out[j].Queue })
	return out
}

// totals adds up every queue.
func totals(qs []queueSummary) queueSummary {
	t := queueSummary{Queue: "all queues"}
	for _, q := range qs {
		t.Pending += q.Pending
		t.Claimed += q.Claimed
		t.Done += q.Done
		t.Failed += q.Failed
	}
	return t
}

// clip cuts s to at most n characters, ending it with "…" when cut: a line of a
// longer text, whole on its own page.
func clip(s string, n int) string { return textcut.Runes(strings.Join(strings.Fields(s), " "), n) }

// browsers and platforms are what browserName looks for in a User-Agent header, in
// order: Edge's and Opera's name Chrome too, Chrome's names Safari, an iPhone's
// names Mac OS X.
var (
	browsers = [][2]string{{"Firefox/", "Firefox"}, {"FxiOS/", "Firefox"}, {"Edg/", "Edge"}, {"EdgiOS/", "Edge"},
		{"EdgA/", "Edge"}, {"OPR/", "Opera"}, {"Chrome/", "Chrome"}, {"Chromium/", "Chrome"}, {"CriOS/", "Chrome"},
		{"Version/", "Safari"}}
	platforms = [][2]string{{"iPhone", "iPhone"}, {"iPad", "iPad"}, {"Android", "Android"}, {"Windows", "Windows"},
		{"Mac OS X", "macOS"}, {"CrOS", "ChromeOS"}, {"Linux", "Linux"}}
)

// browserName reads a User-Agent header as a person would name the browser: "Firefox
// on Linux", "Safari on iPhone". What it does not know it calls an unknown browser;
// the page keeps the whole header in a tooltip.
func browserName(ua string) string {
	if strings.HasPrefix(ua, "curl/") {
		return "curl"
	}
	find := func(table [][2]string) string {
		for _, e := range table {
			if strings.Contains(ua, e[0]) {
				return e[1]
			}
		}
		return ""
	}
	name := find(browsers)
	if name == "" {
		return "unknown browser"
	}
	if on := find(platforms); on != "" {
		return name + " on " + on
	}
	return name
}
