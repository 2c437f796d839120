package web

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"github.com/switchboardhq/switchboard/store"
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
	var name string
	if !u.operators.find(context.Background(), u, func(o *operatorNames) (ok bool) { name, ok = o.byID[id]; return ok }) {
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
	var id int64
	if !u.operators.find(ctx, u, func(o *operatorNames) (ok bool) { id, ok = o.byName[filter]; return ok }) {
		return filter
	}
	return store.OperatorActor(id)
}

// find runs look over what is known, and once more after reading the operators
// again when it found nothing.
func (o *operatorNames) find(ctx context.Context, u *UI, look func(*operatorNames) bool) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if look(o) {
		return true
	}
	o.reload(ctx, u)
	return look(o)
}
