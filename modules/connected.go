package modules

import (
	"context"
	"fmt"

	"github.com/switchboardhq/switchboard/internal/egress"
)

// Capabilities Switchboard connects to itself (remote, rest) have no process:
// they are up once their tools are listed, and down when the connection says
// it broke.

// startRemote opens a remote capability's session and lists its tools.
func (m *module) startRemote(ctx context.Context, strict bool) error {
	o := &m.sup.opts
	policy, err := egress.Parse(o.EgressPolicy)
	if err != nil {
		return fmt.Errorf("modules: %s: start: %w", m.man.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	guard := egress.Guard{Policy: policy, AllowPrivate: m.man.AllowPrivateNetwork}
	red := newRedactor(credentialValues(m.man, o.LookupEnv))
	rc, err := openRemote(ctx, m.man, guard, o.LookupEnv, o.Version, m.requestRefresh, redactLog(m.log, red))
	if err != nil {
		return fmt.Errorf("modules: %s: start: %w", m.man.Name, redactErr(red, err))
	}
	conn := redactUpstream(rc, red)
	l, err := m.catalog(ctx, conn)
	if err == nil {
		err = m.checkMissing(l, strict)
	}
	if err != nil {
		conn.close()
		return fmt.Errorf("modules: %s: start: %w", m.man.Name, err)
	}
	m.up(conn, l, "url", m.man.URL)
	return nil
}

// startREST makes a rest capability's connection and lists its operations.
func (m *module) startREST(ctx context.Context) error {
	o := &m.sup.opts
	policy, err := egress.Parse(o.EgressPolicy)
	if err != nil {
		return fmt.Errorf("modules: %s: start: %w", m.man.Name, err)
	}
	rc, err := newRestConn(m.man, egress.Guard{Policy: policy, AllowPrivate: m.man.AllowPrivateNetwork}, o.LookupEnv)
	if err != nil {
		return err
	}
	conn := redactUpstream(rc, newRedactor(credentialValues(m.man, o.LookupEnv)))
	l, err := m.catalog(ctx, conn)
	if err != nil {
		conn.close()
		return fmt.Errorf("modules: %s: start: %w", m.man.Name, err)
	}
	m.up(conn, l, "base_url", m.man.BaseURL)
	return nil
}

// serveConn holds a connection Switchboard makes itself (remote, rest) until
// it breaks, ctx ends or a restart is asked for, re-listing tools when the
// server says they changed.
func (m *module) serveConn(ctx context.Context) error {
	m.mu.RLock()
	conn := m.sess
	m.mu.RUnlock()
	for {
		select {
		case <-ctx.Done():
			m.shutdown(m.sup.shutdownCtx())
			return ctx.Err()
		case <-m.restart:
			m.shutdown(context.Background())
			return errRestart
		case <-conn.done():
			m.markDown(conn, StateBackoff)
			return fmt.Errorf("remote server unreachable: %w", conn.brokenReason())
		case <-m.refresh:
			m.relist(ctx, conn)
		}
	}
}
