package web

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"

	"github.com/switchboardhq/switchboard/ingest"
)

// A webhook's rules as an operator reads and sets them on its page: one field
// per part of ingest.Rules, turned into the JSON that update_webhook and
// `webhook update --rules` take and checked by the same ingest.ParseNewRules.

// rulesForm is a webhook's rules as the form shows them, or as an operator
// typed them into a form that was refused.
type rulesForm struct {
	Open            bool // the drawer is open: the form was refused
	Events, Actions string
	Match           string // one "/json/pointer = value" a line
	Key             string
	Coalesce        bool
	Debounce        string
	DebounceMax     string
	Priority        string
	Set             bool // the webhook has rules
}

// rulesFormOf shows a webhook's stored rules (JSON written by ParseRules's
// caller, so they read back).
func rulesFormOf(stored []byte) rulesForm {
	var r ingest.Rules
	if len(bytes.TrimSpace(stored)) == 0 || json.Unmarshal(stored, &r) != nil {
		return rulesForm{}
	}
	f := rulesForm{Set: true, Key: r.Key, Coalesce: r.Coalesce, Debounce: r.Debounce, DebounceMax: r.DebounceMax}
	if r.Priority != 0 {
		f.Priority = strconv.Itoa(r.Priority)
	}
	if r.Filter != nil {
		f.Events, f.Actions = strings.Join(r.Filter.Events, ", "), strings.Join(r.Filter.Actions, ", ")
		var lines []string
		for p, v := range r.Filter.Match {
			lines = append(lines, p+" = "+string(v))
		}
		sort.Strings(lines)
		f.Match = strings.Join(lines, "\n")
	}
	return f
}

// MatchLines are the form's JSON-pointer equalities, one a line, for the page.
func (f rulesForm) MatchLines() []string {
	if strings.TrimSpace(f.Match) == "" {
		return nil
	}
	return strings.Split(f.Match, "\n")
}

// readRulesForm reads the submitted rules form into the rules JSON the store
// keeps (nil: no rules); msg says what is wrong, in ParseRules's words where
// it is the rules themselves.
func readRulesForm(pf map[string][]string) (f rulesForm, rules []byte, msg string) {
	get := func(k string) string {
		if v := pf[k]; len(v) > 0 {
			return strings.TrimSpace(v[0])
		}
		return ""
	}
	f = rulesForm{Open: true, Events: get("events"), Actions: get("actions"), Match: get("match"), Key: get("key"),
		Coalesce: get("coalesce") != "", Debounce: get("debounce"), DebounceMax: get("debounce_max"), Priority: get("priority")}
	f.Match = strings.ReplaceAll(f.Match, "\r\n", "\n")
	type filter struct {
		Events  []string                   `json:"events,omitempty"`
		Actions []string                   `json:"actions,omitempty"`
		Match   map[string]json.RawMessage `json:"match,omitempty"`
	}
	raw := struct {
		Filter      *filter `json:"filter,omitempty"`
		Key         string  `json:"key,omitempty"`
		Coalesce    bool    `json:"coalesce,omitempty"`
		Debounce    string  `json:"debounce,omitempty"`
		DebounceMax string  `json:"debounce_max,omitempty"`
		Priority    int     `json:"priority,omitempty"`
	}{Key: f.Key, Coalesce: f.Coalesce, Debounce: f.Debounce, DebounceMax: f.DebounceMax}
	if f.Priority != "" {
		p, err := strconv.Atoi(f.Priority)
		if err != nil {
			return f, nil, fmt.Sprintf("The priority %q is not a whole number (-1000 to 1000).", f.Priority)
		}
		raw.Priority = p
	}
	fl := filter{Events: splitCommas(f.Events), Actions: splitCommas(f.Actions)}
	var seen map[string]int // a match pointer's line
	for i, line := range strings.Split(f.Match, "\n") {
		if line = strings.TrimSpace(line); line == "" {
			continue
		}
		// " = " first, as the page writes a line: a pointer may hold "=".
		pointer, value, ok := strings.Cut(line, " = ")
		if !ok {
			pointer, value, ok = strings.Cut(line, "=")
		}
		pointer, value = strings.TrimSpace(pointer), strings.TrimSpace(value)
		if !ok || value == "" {
			return f, nil, fmt.Sprintf("Match line %d: write /json/pointer = value, as in /pull_request/draft = false.", i+1)
		}
		if fl.Match == nil {
			fl.Match, seen = map[string]json.RawMessage{}, map[string]int{}
		}
		if at, dup := seen[pointer]; dup {
			return f, nil, fmt.Sprintf("Match line %d: %s is on line %d already; a pointer is compared with one value.", i+1, pointer, at)
		}
		fl.Match[pointer], seen[pointer] = matchValue(value), i+1
	}
	if len(fl.Events)+len(fl.Actions)+len(fl.Match) > 0 {
		raw.Filter = &fl
	}
	text, err := json.Marshal(raw)
	if err != nil {
		return f, nil, err.Error()
	}
	r, err := ingest.ParseNewRules(text)
	if err != nil {
		return f, nil, "The rules are refused: " + ingest.RulesMessage(err) + "."
	}
	if r == nil {
		return f, nil, ""
	}
	if rules, err = json.Marshal(r); err != nil {
		return f, nil, err.Error()
	}
	return f, rules, ""
}

// splitCommas splits a list at its commas alone, unlike splitList: an event
// type may hold spaces (GitLab's Merge Request Hook).
func splitCommas(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" && !contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// matchValue is a match line's value: JSON (false, 42, "text", null) as
// written, and any other text as a JSON string, so refs/heads/main needs no
// quotes.
func matchValue(v string) json.RawMessage {
	if json.Valid([]byte(v)) {
		return json.RawMessage(v)
	}
	q, _ := json.Marshal(v)
	return q
}

// setWebhookRules serves POST /webhook/:id/rules: the rules set from the form,
// or removed (remove=1); a refused form is shown again with its reason, and
// nothing changes.
func (u *UI) setWebhookRules(w http.ResponseWriter, r *http.Request, rc *reqCtx) {
	id, ok := pathID(rc, "id")
	if !ok {
		u.fail(w, r, rc, http.StatusNotFound, "There is no such webhook.")
		return
	}
	var rules []byte
	if r.PostForm.Get("remove") == "" {
		f, text, msg := readRulesForm(r.PostForm)
		if msg != "" {
			u.showWebhook(w, r, rc, id, http.StatusBadRequest, webhookForm{Rules: &f}, msg)
			return
		}
		rules = text
	}
	if _, err := u.store.SetWebhookRules(r.Context(), id, 0, rules, rc.actor()); err != nil {
		u.storeError(w, r, rc, fmt.Sprintf("Setting the rules of webhook %d", id), err)
		return
	}
	flash := "rules-set"
	if rules == nil {
		flash = "rules-removed"
	}
	u.redirectFlash(w, r, rc, fmt.Sprintf("/webhook/%d", id), flash)
}
