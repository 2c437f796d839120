package web

import (
	"context"
	"strconv"
	"strings"
	"sync"
)

// The store names an operator's acts "human:<id>"; the board shows the
// operator's name beside it, and the audit filter takes the name as well.
// Usernames never change, so what is read stays true; an id not yet known
// (an operator created since) reloads the list, which is a handful of rows.

type operatorNames struct {
	mu     sync.Mutex
	byID   map[int64]string
	byName map[string]int64
}

// reload reads every operator; the caller holds mu.
func (o *operatorNames) reload(ctx context.Context, u *UI) {
	ops, err := u.store.ListOperators(ctx)
	if err != nil {
		u.log.Warn("web: list operators", "err", err)
		return
	}
	o.byID, o.byName = make(map[int64]string, len(ops)), make(map[string]int64, len(ops))
	for _, op := range ops {
		o.byID[op.ID], o.byName[op.Username] = op.Username, op.ID
	}
}

// who is how the board shows an actor: "ana (human:1)" for an operator, any
// other actor as it is.
func (u *UI) who(actor string) string {
	rest, ok := strings.CutPrefix(actor, "human:")
	if !ok {
		return actor
	}
	id, err := strconv.ParseInt(rest, 10, 64)
	if err != nil {
		return actor
	}
	o := &u.operators
	o.mu.Lock()
	defer o.mu.Unlock()
	name, ok := o.byID[id]
	if !ok {
		o.reload(context.Background(), u)
		name, ok = o.byID[id]
	}
	if !ok {
		return actor
	}
	return name + " (" + actor + ")"
}

// operatorActor turns an audit filter that names an operator ("ana") into the
// actor the log has ("human:1"); anything else is returned as it is.
func (u *UI) operatorActor(ctx context.Context, filter string) string {
	if filter == "" || strings.Contains(filter, ":") {
		return filter
	}
	o := &u.operators
	o.mu.Lock()
	defer o.mu.Unlock()
	id, ok := o.byName[filter]
	if !ok {
		o.reload(ctx, u)
		id, ok = o.byName[filter]
	}
	if !ok {
		return filter
	}
	return humanActor(id)
}
