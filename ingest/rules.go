package ingest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// Webhook rules: which deliveries make a todo, and with what key, priority and
// coalescing. An agent sets them in create_webhook and update_webhook, a human
// on the board or with the CLI; the receiver applies them to each verified
// delivery. A delivery the filter drops is still recorded (and deduplicated),
// as an event filtered by rule, and makes no todo.

// Rules is a webhook's rules, as JSON:
//
//	{"filter": {"events": ["pull_request"], "actions": ["opened", "synchronize"],
//	            "match": {"/pull_request/draft": false}},
//	 "key": "{/repository/full_name}#{/pull_request/number}",
//	 "coalesce": true, "debounce": "30s", "debounce_max": "5m", "priority": 5}
type Rules struct {
	Filter      *Filter `json:"filter,omitempty"`
	Key         string  `json:"key,omitempty"`
	Coalesce    bool    `json:"coalesce,omitempty"`
	Debounce    string  `json:"debounce,omitempty"`
	DebounceMax string  `json:"debounce_max,omitempty"`
	Priority    int     `json:"priority,omitempty"`

	key     []keyPart
	options store.TodoOptions // Key left empty: it comes from each body
	match   []pointerMatch
}

// Filter keeps a delivery when each of its parts matches (an empty part
// matches anything): the provider's event type (GitHub X-GitHub-Event, Stripe
// and Standard Webhooks type, GitLab X-Gitlab-Event, Slack's event type), the
// body's "action" (GitHub's opened, synchronize…), and JSON-pointer equalities
// on the body.
type Filter struct {
	Events  []string                   `json:"events,omitempty"`
	Actions []string                   `json:"actions,omitempty"`
	Match   map[string]json.RawMessage `json:"match,omitempty"`
}

type keyPart struct {
	text    string
	pointer []string // nil: text is literal
}

type pointerMatch struct {
	pointer []string
	text    string // the pointer as written, for messages
	want    any
}

// maxRules bounds a webhook's rules as JSON.
const maxRules = 8 << 10

// ParseRules reads and checks rules as JSON; empty (or null) is no rules. A
// mistake is store.ErrInvalid with a message that names it.
func ParseRules(raw []byte) (*Rules, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" || string(raw) == "{}" {
		return nil, nil
	}
	if len(raw) > maxRules {
		return nil, rulesErr("rules are %d bytes, at most %d", len(raw), maxRules)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var r Rules
	if err := dec.Decode(&r); err != nil {
		return nil, rulesErr("rules: %s (fields: filter {events, actions, match}, key, coalesce, debounce, debounce_max, priority)",
			strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return nil, rulesErr("rules: one JSON object, nothing after it")
	}
	if err := r.compile(); err != nil {
		return nil, err
	}
	return &r, nil
}

// ParseNewRules is ParseRules for rules a person or an agent sets now, which
// are also checked as new todo options are (store.TodoOptions.ValidateNew).
// Rules already stored are read with ParseRules, so that those accepted
// before still apply.
func ParseNewRules(raw []byte) (*Rules, error) {
	r, err := ParseRules(raw)
	if err != nil || r == nil {
		return r, err
	}
	o := r.options
	o.Key = "k"
	if err := o.ValidateNew(); err != nil {
		return nil, rulesErr("%s", err)
	}
	return r, nil
}

func (r *Rules) compile() error {
	var err error
	if r.Key != "" {
		if r.key, err = parseKeyTemplate(r.Key); err != nil {
			return err
		}
	}
	// Checked as a todo with some key would be: each delivery's key comes later.
	o := store.TodoOptions{Key: "k", Coalesce: r.Coalesce, Priority: r.Priority}
	if o.Debounce, err = ruleDuration("debounce", r.Debounce); err != nil {
		return err
	}
	if o.DebounceMax, err = ruleDuration("debounce_max", r.DebounceMax); err != nil {
		return err
	}
	if r.Coalesce && r.Key == "" {
		return rulesErr("coalesce needs a key template")
	}
	if err := o.Validate(); err != nil {
		return rulesErr("%s", err)
	}
	o.Key = ""
	r.options = o
	if r.Filter == nil {
		return nil
	}
	for text, want := range r.Filter.Match {
		p, err := parsePointer(text)
		if err != nil {
			return err
		}
		var v any
		if err := json.Unmarshal(want, &v); err != nil {
			return rulesErr("match %s: the value is not JSON", text)
		}
		switch v.(type) {
		case map[string]any, []any: // sameJSON never matches one: every delivery would be filtered
			return rulesErr("match %s: compare with a string, number, true, false or null, not an object or array", text)
		}
		r.match = append(r.match, pointerMatch{pointer: p, text: text, want: v})
	}
	return nil
}

func ruleDuration(name, s string) (time.Duration, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, rulesErr("%s %q: a duration such as 30s or 5m", name, s)
	}
	return d, nil
}

// parseKeyTemplate splits a key template into text and {/json/pointer} parts;
// it needs at least one pointer (a key without one would put every delivery
// under one key).
func parseKeyTemplate(t string) ([]keyPart, error) {
	var parts []keyPart
	pointers := 0
	for rest := t; rest != ""; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			parts = append(parts, keyPart{text: rest})
			break
		}
		if open > 0 {
			parts = append(parts, keyPart{text: rest[:open]})
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return nil, rulesErr("key %q: a { without its }", t)
		}
		text := rest[open+1 : open+end]
		p, err := parsePointer(text)
		if err != nil {
			return nil, err
		}
		parts = append(parts, keyPart{text: text, pointer: p})
		pointers++
		rest = rest[open+end+1:]
	}
	if pointers == 0 {
		return nil, rulesErr("key %q has no {/json/pointer}: every delivery would share one key", t)
	}
	return parts, nil
}

// parsePointer parses a JSON pointer (RFC 6901) into its reference tokens. The
// whole document ("") is refused: a rule compares or names a value inside it.
func parsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/") {
		return nil, rulesErr("JSON pointer %q does not parse: it does not start with /", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, tok := range tokens {
		if strings.Contains(strings.NewReplacer("~0", "", "~1", "").Replace(tok), "~") {
			return nil, rulesErr("JSON pointer %q does not parse: ~ is followed by 0 or 1 only", p)
		}
		tokens[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
	}
	return tokens, nil
}

func rulesErr(format string, a ...any) error {
	return fmt.Errorf("%w: %s", store.ErrInvalid, fmt.Sprintf(format, a...))
}

// RulesMessage is how a rules mistake reads to the person who made it.
func RulesMessage(err error) string {
	return strings.TrimPrefix(err.Error(), store.ErrInvalid.Error()+": ")
}

// Decision is what the rules make of one delivery.
type Decision struct {
	Filtered bool              // the filter dropped it: record it, make no todo
	Options  store.TodoOptions // the todo's key, priority, coalescing
}

// Apply decides for a delivery of eventType with body. A key whose pointers the
// body lacks (or that comes out too long) gives a keyless todo, never coalesced.
func (r *Rules) Apply(eventType string, body []byte) Decision {
	if r == nil {
		return Decision{}
	}
	get := newLookup(body).get
	if f := r.Filter; f != nil {
		if len(f.Events) > 0 && !contains(f.Events, eventType) {
			return Decision{Filtered: true}
		}
		if len(f.Actions) > 0 {
			action, _ := get([]string{"action"})
			s, ok := action.(string)
			if !ok || !contains(f.Actions, s) {
				return Decision{Filtered: true}
			}
		}
		for _, m := range r.match {
			got, ok := get(m.pointer)
			if !ok || !sameJSON(got, m.want) {
				return Decision{Filtered: true}
			}
		}
	}
	o := r.options
	if key, ok := r.keyOf(get); ok {
		o.Key = key
	} else {
		o.Coalesce, o.Debounce, o.DebounceMax = false, 0, 0
	}
	return Decision{Options: o}
}

// ReplayOptions is what a replay of a stored delivery with body takes from its
// webhook's rules as stored now (rules; empty: none): the key and priority the
// delivery would get, so that the replay waits behind its key's todo in flight
// as a new delivery would. It is neither filtered nor folded: a replay is asked
// for, and makes a todo of its own. Rules that no longer parse give none.
func ReplayOptions(rules []byte, body []byte) store.TodoOptions {
	r, err := ParseRules(rules)
	if err != nil || r == nil {
		return store.TodoOptions{}
	}
	o := store.TodoOptions{Priority: r.options.Priority}
	if key, ok := r.keyOf(newLookup(body).get); ok {
		o.Key = key
	}
	return o
}

// keyOf fills the key template from the body.
func (r *Rules) keyOf(get func([]string) (any, bool)) (string, bool) {
	if len(r.key) == 0 {
		return "", false
	}
	var b strings.Builder
	for _, part := range r.key {
		if part.pointer == nil {
			b.WriteString(part.text)
			continue
		}
		v, ok := get(part.pointer)
		if !ok {
			return "", false
		}
		switch v := v.(type) {
		case string:
			b.WriteString(v)
		case json.Number:
			b.WriteString(v.String())
		case bool:
			b.WriteString(strconv.FormatBool(v))
		default: // an object, array or null names no subject
			return "", false
		}
	}
	key := b.String()
	if (store.TodoOptions{Key: key}).Validate() != nil {
		return "", false
	}
	return key, true
}

// sameJSON compares a value from a body (numbers as json.Number) with one from
// a rule (numbers as float64).
func sameJSON(got, want any) bool {
	if n, ok := got.(json.Number); ok {
		f, err := n.Float64()
		w, isNum := want.(float64)
		return err == nil && isNum && f == w
	}
	switch g := got.(type) {
	case string, bool, nil:
		return g == want
	}
	return false // objects and arrays are not compared
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}
