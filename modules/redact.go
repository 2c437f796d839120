package modules

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
)

// A remote or rest capability's credential is the gateway's, not its agents':
// a server that echoes it (an error page quoting the request's headers, a
// debugging endpoint) must not hand it to an agent, or to the log, the board
// and the audit its errors reach. Every answer and error of such a
// connection has the credential's values replaced.

// redactedMark stands where a credential was.
const redactedMark = "[redacted]"

// minRedacted is the shortest value redacted: a shorter one would garble
// every text it happens to occur in, and guards nothing.
const minRedacted = 6

// credentialValues are the values a capability's credential puts on the
// wire and in its variables, read as the connection reads them.
func credentialValues(man Manifest, lookup func(string) (string, bool)) []string {
	get := func(name string) string { v, _ := lookup(name); return v }
	var out []string
	for _, name := range slices.Sorted(maps.Keys(man.Headers)) {
		ref := man.Headers[name]
		out = append(out, get(ref.Env), ref.Prefix+get(ref.Env))
	}
	if a := man.Auth; a != nil {
		switch a.Type {
		case "bearer":
			out = append(out, get(a.Env), "Bearer "+get(a.Env))
		case "header":
			out = append(out, get(a.Env), a.Prefix+get(a.Env))
		case "basic":
			pair := get(a.UsernameEnv) + ":" + get(a.PasswordEnv)
			out = append(out, get(a.PasswordEnv), pair, base64.StdEncoding.EncodeToString([]byte(pair)))
		}
	}
	return out
}

// newRedactor replaces each value, and its form inside a JSON string, longest
// first; nil when there is nothing to replace.
func newRedactor(values []string) *strings.Replacer {
	set := map[string]bool{}
	for _, v := range values {
		if len(v) < minRedacted {
			continue
		}
		set[v] = true
		if q, err := json.Marshal(v); err == nil {
			set[string(q[1:len(q)-1])] = true
		}
	}
	if len(set) == 0 {
		return nil
	}
	keys := slices.Collect(maps.Keys(set))
	slices.SortFunc(keys, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(keys))
	for _, k := range keys {
		pairs = append(pairs, k, redactedMark)
	}
	return strings.NewReplacer(pairs...)
}

// redacting is an upstream whose answers and errors carry no credential.
type redacting struct {
	upstream
	r *strings.Replacer
}

// redactUpstream wraps u, unless there is nothing to redact.
func redactUpstream(u upstream, r *strings.Replacer) upstream {
	if r == nil {
		return u
	}
	return redacting{upstream: u, r: r}
}

func (c redacting) listTools(ctx context.Context) ([]upstreamTool, []RefusedTool, []string, int, error) {
	tools, refused, names, nameless, err := c.upstream.listTools(ctx)
	return tools, refused, names, nameless, redactErr(c.r, err)
}

func (c redacting) callTool(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	res, err := c.upstream.callTool(ctx, name, args)
	if res != nil {
		res = json.RawMessage(c.r.Replace(string(res)))
	}
	return res, redactErr(c.r, err)
}

func (c redacting) brokenReason() error { return redactErr(c.r, c.upstream.brokenReason()) }

// redactErr is err with its text redacted. It is still the sentinel errors it
// was (errors.Is), and an RPCError it holds is one with its message redacted.
func redactErr(r *strings.Replacer, err error) error {
	if err == nil || r == nil {
		return err
	}
	return &redactedError{err: err, msg: r.Replace(err.Error()), r: r}
}

type redactedError struct {
	err error
	msg string
	r   *strings.Replacer
}

func (e *redactedError) Error() string        { return e.msg }
func (e *redactedError) Is(target error) bool { return errors.Is(e.err, target) }

func (e *redactedError) As(target any) bool {
	p, ok := target.(**RPCError)
	if !ok {
		return errors.As(e.err, target) // a selectionError, say: no server's text
	}
	var rpc *RPCError
	if !errors.As(e.err, &rpc) {
		return false
	}
	*p = &RPCError{Code: rpc.Code, Message: e.r.Replace(rpc.Message)}
	return true
}

// redactLog is log with the credential's values replaced in every record's
// message and attributes: the transport logs what a server answered.
func redactLog(log *slog.Logger, r *strings.Replacer) *slog.Logger {
	if r == nil {
		return log
	}
	return slog.New(redactHandler{Handler: log.Handler(), r: r})
}

type redactHandler struct {
	slog.Handler
	r *strings.Replacer
}

func (h redactHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.Replace(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.Handler.Handle(ctx, out)
}

func (h redactHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindGroup:
		group := v.Group()
		out := make([]any, 0, len(group))
		for _, g := range group {
			out = append(out, h.attr(g))
		}
		return slog.Group(a.Key, out...)
	case slog.KindString, slog.KindAny:
		return slog.String(a.Key, h.r.Replace(v.String()))
	}
	return a
}

func (h redactHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	out := make([]slog.Attr, 0, len(attrs))
	for _, a := range attrs {
		out = append(out, h.attr(a))
	}
	return redactHandler{Handler: h.Handler.WithAttrs(out), r: h.r}
}

func (h redactHandler) WithGroup(name string) slog.Handler {
	return redactHandler{Handler: h.Handler.WithGroup(name), r: h.r}
}
