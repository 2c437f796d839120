package agent

import (
	"context"
	"sync"
)

// runGroup counts the module calls running apart from their requests (runs),
// so that shutdown can wait for them. Unlike a sync.WaitGroup it may be waited
// on while runs still start.
type runGroup struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0
}

func (g *runGroup) start() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n == 0 {
		g.idle = make(chan struct{})
	}
	g.n++
}

func (g *runGroup) end() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.n--; g.n == 0 {
		close(g.idle)
	}
}

// Wait waits until every module call started so far has ended and been
// audited, or ctx ends. serve calls it after stopping the modules and before
// closing the store: a call waiting for its agent's answer has no request
// that http.Server.Shutdown would wait for.
func (m *Modules) Wait(ctx context.Context) error {
	m.runs.mu.Lock()
	if m.runs.n == 0 {
		m.runs.mu.Unlock()
		return nil
	}
	idle := m.runs.idle
	m.runs.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
