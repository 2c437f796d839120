package store

import (
	"fmt"
	"time"
	"unicode/utf8"
)

// Flow control: what a producer says about when, in which order and how often a
// todo is worked. The rules live here; the edges (CLI, verbs, webhook rules)
// validate with TodoOptions.Validate and pass the struct through.

// Limits on TodoOptions.
const (
	MaxKeyBytes = 200
	MinPriority = -1000
	MaxPriority = 1000
	// MaxDelay bounds Delay, Debounce and DebounceMax.
	MaxDelay = 30 * 24 * time.Hour
	// DefaultDebounceMaxFactor: without DebounceMax, a burst is cut off after
	// this many debounce windows, so that a producer that never pauses still
	// gets worked.
	DefaultDebounceMaxFactor = 10
)

// TodoOptions are a todo's flow control. The zero value is a plain todo:
// keyless, priority 0, claimable at once, never folded.
type TodoOptions struct {
	// Key groups todos of one subject (e.g. "octo/repo#42"): at most one todo
	// per (queue, key) is claimed at a time, and they are taken oldest first.
	Key string
	// Priority: claim_next takes the highest first, oldest first within one.
	Priority int
	// Delay keeps a new todo unclaimable for this long.
	Delay time.Duration
	// Coalesce (needs Key): while a todo of the key is pending on the queue,
	// this one folds into it (newer payload and source, coalesced+1) instead of
	// making a second todo. A claimed todo is never changed.
	Coalesce bool
	// Debounce (needs Coalesce): the todo is not claimable until Debounce after
	// the last todo folded into it, and at most DebounceMax after the first.
	Debounce    time.Duration
	DebounceMax time.Duration
}

// Validate says what is wrong with o, wrapping ErrInvalid, or nil.
func (o TodoOptions) Validate() error {
	switch {
	case len(o.Key) > MaxKeyBytes:
		return invalidOption("key is %d bytes, at most %d", len(o.Key), MaxKeyBytes)
	case !validKey(o.Key):
		return invalidOption("key %q: must be UTF-8 text without control characters", o.Key)
	case o.Priority < MinPriority || o.Priority > MaxPriority:
		return invalidOption("priority %d: must be from %d to %d", o.Priority, MinPriority, MaxPriority)
	case o.Delay < 0 || o.Delay > MaxDelay:
		return invalidOption("delay %s: must be from 0 to %s", o.Delay, MaxDelay)
	case o.Debounce < 0 || o.Debounce > MaxDelay || o.DebounceMax < 0 || o.DebounceMax > MaxDelay:
		return invalidOption("debounce %s, debounce_max %s: each must be from 0 to %s",
			o.Debounce, o.DebounceMax, MaxDelay)
	case o.Coalesce && o.Key == "":
		return invalidOption("coalesce needs a key")
	case (o.Debounce > 0 || o.DebounceMax > 0) && !o.Coalesce:
		return invalidOption("debounce needs coalesce")
	case o.DebounceMax > 0 && o.DebounceMax < o.Debounce:
		return invalidOption("debounce_max %s is shorter than debounce %s", o.DebounceMax, o.Debounce)
	}
	return nil
}

// ValidateNew is Validate for options a person or an agent gives now, which
// also refuses debounce_max without debounce: it would do nothing. Options
// already stored (a webhook's rules) keep Validate's checks alone, so that
// rules accepted before still apply.
func (o TodoOptions) ValidateNew() error {
	if err := o.Validate(); err != nil {
		return err
	}
	if o.DebounceMax > 0 && o.Debounce == 0 {
		return invalidOption("debounce_max needs debounce: it caps how long debounce may hold a todo")
	}
	return nil
}

// optionError is a TodoOptions mistake: its text is for the person who made it
// (the edges print it as it is), and it is ErrInvalid.
type optionError struct{ msg string }

func (e optionError) Error() string { return e.msg }
func (e optionError) Unwrap() error { return ErrInvalid }

func invalidOption(format string, a ...any) error { return optionError{fmt.Sprintf(format, a...)} }

func validKey(k string) bool {
	if !utf8.ValidString(k) {
		return false
	}
	for _, r := range k {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

// firstAvailable is when a new todo with o, added at now, becomes claimable,
// in the whole milliseconds it is stored in (rounded up: never sooner than
// asked), so that an add answers what a read of the todo finds.
func (o TodoOptions) firstAvailable(now time.Time) time.Time {
	return ceilMS(now.Add(max(o.Delay, o.Debounce)))
}

// ceilMS is t rounded up to a whole millisecond.
func ceilMS(t time.Time) time.Time {
	if c := t.Truncate(time.Millisecond); c.Before(t) {
		return c.Add(time.Millisecond)
	}
	return t
}

// debounced is when a pending todo first added at created becomes claimable
// after a todo with o folded into it at now: the window restarts, up to the cap,
// but never ends before available (a longer delay, or a retry's backoff, holds).
// Without a debounce the todo keeps available.
func (o TodoOptions) debounced(available, created, now time.Time) time.Time {
	if o.Debounce <= 0 {
		return available
	}
	limit := o.DebounceMax
	if limit <= 0 {
		limit = DefaultDebounceMaxFactor * o.Debounce
	}
	return ceilMS(maxTime(available, minTime(now.Add(o.Debounce), maxTime(created.Add(limit), now))))
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
