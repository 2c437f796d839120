package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/internal/pretty"
	"github.com/switchboardhq/switchboard/store"
)

// shownTodo is a todo as `todo show --json` prints it: the whole of it, its
// payload base64 when it is not UTF-8 text (a webhook's binary body), as the
// agents' claim gives it.
type shownTodo struct {
	store.Todo
	Payload         string `json:"payload"`
	PayloadEncoding string `json:"payload_encoding"`
}

// todoShow prints one todo whole: its state and history in brief, its last error
// and result, and its payload, as the board's todo page shows them.
func todoShow(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "todo show", todoSynopsis)
	db := dbFlag(fs, env)
	asJSON := fs.Bool("json", false, "print JSON")
	id, rest, err := leadingID(fs, "todo", args)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	s, err := openStoreRO(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	t, err := s.Todo(ctx, id)
	if err != nil {
		return err
	}
	if *asJSON {
		v := shownTodo{Todo: t}
		v.Payload, v.PayloadEncoding = agent.JSONText(t.Payload)
		return writeJSON(env, v)
	}
	writeTodo(env.stdout, t, s.Now())
	return nil
}

// writeTodo writes t for a person at a terminal: what the user did not write
// (a payload, an error an agent sent) is escaped, so that it cannot drive the
// terminal.
func writeTodo(w io.Writer, t store.Todo, now time.Time) {
	at := func(t time.Time) string { return t.Local().Format(time.DateTime) }
	fmt.Fprintf(w, "todo %d on %s: %s, attempts %d/%d\n", t.ID, printable(t.Queue), t.State, t.Attempts, t.MaxAttempts)
	src := t.Source.Type
	if t.Source.EventType != "" {
		src += " " + t.Source.EventType
	}
	if t.Source.WebhookID != 0 {
		src += fmt.Sprintf(" (webhook %d, event %d)", t.Source.WebhookID, t.Source.EventID)
	}
	if t.Trust.Verified {
		src += ", verified (" + t.Trust.Mode + ")"
	}
	fmt.Fprintf(w, "source:     %s\n", printable(src))
	fmt.Fprintf(w, "created:    %s by %s\n", at(t.CreatedAt), printable(t.CreatedBy))
	fmt.Fprintf(w, "updated:    %s\n", at(t.UpdatedAt))
	writeFlow(w, t)
	switch {
	case t.State == store.StateClaimed && t.LeaseExpiry != nil:
		fmt.Fprintf(w, "claimed by: %s, lease until %s\n", printable(t.Owner), at(*t.LeaseExpiry))
	case t.Waiting == store.WaitingApproval && t.Approval != nil:
		fmt.Fprintf(w, "awaiting approval: %s asks: %s\n", printable(t.Owner), printable(t.Approval.Question))
	case t.State == store.StatePending && t.AvailableAt.After(now) && heldForAsker(t):
		fmt.Fprintf(w, "held:       for the worker that asked for approval, until %s\n", at(t.AvailableAt))
	case t.State == store.StatePending && t.AvailableAt.After(now) && t.Attempts > 0:
		fmt.Fprintf(w, "backs off:  claimable again at %s\n", at(t.AvailableAt))
	case t.State == store.StatePending && t.AvailableAt.After(now):
		fmt.Fprintf(w, "delayed:    claimable at %s\n", at(t.AvailableAt))
	case t.FinishedAt != nil:
		fmt.Fprintf(w, "%-11s %s\n", t.State+":", at(*t.FinishedAt))
	}
	if a := t.Approval; a != nil && a.State != store.ApprovalAsked {
		answer := a.State + " by " + a.By
		if a.Comment != "" {
			answer += ": " + a.Comment
		}
		fmt.Fprintf(w, "approval:   %s (asked: %s)\n", printable(answer), printable(a.Question))
	}
	if t.LastError != "" {
		fmt.Fprintf(w, "last error: %s\n", printable(t.LastError))
	}
	if t.Result != "" {
		r := pretty.Raw(t.Result)
		fmt.Fprintf(w, "result:     %s\n", printable(r.Body))
		writeCut(w, r)
	}
	fmt.Fprintf(w, "payload (%d bytes):\n", t.PayloadSize)
	if !utf8.ValidString(t.Payload) {
		fmt.Fprintln(w, "  (not UTF-8 text: --json shows it base64)")
		return
	}
	p := pretty.Format(t.Payload)
	for _, line := range strings.Split(strings.TrimRight(p.Body, "\n"), "\n") {
		fmt.Fprintf(w, "  %s\n", printable(line))
	}
	writeCut(w, p)
}

// heldForAsker says that pending t waits out the hold a decision gives the
// worker that asked (store.Decide): it was last changed by that decision,
// which made it claimable ApprovalHold later. Its attempts may be above 0 (an
// earlier attempt failed), so they do not tell it from a backoff, which no
// RetryBackoff makes one ApprovalHold long.
func heldForAsker(t store.Todo) bool {
	return t.Approval != nil && t.Approval.State != store.ApprovalAsked &&
		t.AvailableAt.Equal(t.UpdatedAt.Add(store.ApprovalHold))
}

// writeFlow writes t's key (and whether it waits behind it), priority and
// folds ([keys, coalescing, delays and priorities](docs/flow-control.md)).
func writeFlow(w io.Writer, t store.Todo) {
	if t.Key != "" {
		key := printable(t.Key)
		if t.KeyWaiting {
			key += " (waits behind an earlier todo of its key)"
		}
		fmt.Fprintf(w, "key:        %s\n", key)
	}
	if t.Priority != 0 {
		fmt.Fprintf(w, "priority:   %d\n", t.Priority)
	}
	switch {
	case t.Coalesced == 1:
		fmt.Fprintln(w, "coalesced:  1 later todo folded into it")
	case t.Coalesced > 1:
		fmt.Fprintf(w, "coalesced:  %d later todos folded into it\n", t.Coalesced)
	}
}

// writeCut says, under a text shown in part, that it is and where the whole is.
func writeCut(w io.Writer, t pretty.Text) {
	if t.Cut {
		fmt.Fprintf(w, "  (only the first %d of %d bytes are shown: --json prints it whole)\n", len(t.Body), t.Size)
	}
}
