package store

import (
	"context"
	"fmt"
)

// RevokeEndpoint revokes an endpoint: its credential fails from the next request on.
func (s *Store) RevokeEndpoint(ctx context.Context, id int64, actor string) error {
	_, err := s.RevokeEndpointReleasing(ctx, id, actor)
	return err
}

// RevokeEndpointReleasing revokes the endpoint and, when no other live endpoint
// speaks for its agent, hands the todos the agent holds back to their queues at
// once (as a release: the claim is not counted as an attempt): the agent can
// no longer complete them, and its leases could run for hours. An agent with
// another live credential (a rotation: new endpoint first, then the old one
// revoked) keeps its work. It reports how many todos went back.
func (s *Store) RevokeEndpointReleasing(ctx context.Context, id int64, actor string) (r Revocation, err error) {
	// Once committed (or not): this process's next lookup reads the row again.
	defer s.creds.changed()
	err = s.write(ctx, func(w *wtx) error {
		r = Revocation{}
		w.credsChanged = true // before the rings of the todos it hands back
		if err := w.lockAgentEndpoints(id); err != nil {
			return err
		}
		var agentID string
		err := w.queryRow(`UPDATE endpoints SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL RETURNING agent_id`,
			ms(w.now), id).Scan(&agentID)
		if notFound(err) {
			return fmt.Errorf("store: revoke endpoint %d (unknown or already revoked): %w", id, ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: revoke endpoint %d: %w", id, err)
		}
		if err := w.revokeEndpointGrants(id); err != nil {
			return err
		}
		var others int
		if err := w.queryRow(`SELECT count(*) FROM endpoints WHERE agent_id = ? AND revoked_at IS NULL`, agentID).Scan(&others); err != nil {
			return fmt.Errorf("store: revoke endpoint %d: %w", id, err)
		}
		if others > 0 {
			r.Kept = true
			if err := w.queryRow(`SELECT count(*) FROM todos WHERE state = 'claimed' AND owner = ?`, "agent:"+agentID).Scan(&r.Holds); err != nil {
				return fmt.Errorf("store: revoke endpoint %d: count its agent's claims: %w", id, err)
			}
			return w.audit(actor, "endpoint.revoke", endpointTarget(id), "",
				fmt.Sprintf("agent %s keeps its todos: another endpoint of it is live", agentID))
		}
		rows, err := w.query(`SELECT id FROM todos WHERE state = 'claimed' AND owner = ?`, "agent:"+agentID)
		if err != nil {
			return fmt.Errorf("store: revoke endpoint %d: find its agent's claims: %w", id, err)
		}
		var held []int64
		for rows.Next() {
			var t int64
			if err := rows.Scan(&t); err != nil {
				rows.Close()
				return fmt.Errorf("store: revoke endpoint %d: find its agent's claims: %w", id, err)
			}
			held = append(held, t)
		}
		if err := rows.Err(); err != nil {
			rows.Close()
			return fmt.Errorf("store: revoke endpoint %d: find its agent's claims: %w", id, err)
		}
		rows.Close()
		for _, t := range held {
			if _, err := w.release(t, actor, "todo.release", fmt.Sprintf("endpoint %d revoked", id)); err != nil {
				return err
			}
		}
		r.Released = len(held)
		return w.audit(actor, "endpoint.revoke", endpointTarget(id), "",
			fmt.Sprintf("handed %d todos of agent %s back to their queues", r.Released, agentID))
	})
	return r, err
}

// lockAgentEndpoints, on PostgreSQL, locks the rows of every endpoint of endpoint
// id's agent, in id order, before a revocation counts which of them are live: two
// processes revoking an agent's last two endpoints at once would otherwise each
// see the other still live, and neither would hand its todos back. SQLite's
// single writer serialises them already.
func (w *wtx) lockAgentEndpoints(id int64) error {
	if !w.w.s.pg {
		return nil
	}
	rows, err := w.query(`SELECT id FROM endpoints WHERE agent_id = (SELECT agent_id FROM endpoints WHERE id = ?)
		ORDER BY id FOR UPDATE`, id)
	if err != nil {
		return fmt.Errorf("store: revoke endpoint %d: lock its agent's endpoints: %w", id, err)
	}
	return rows.Close()
}

// Revocation says what revoking an endpoint did with the todos its agent holds.
type Revocation struct {
	Released int  // handed back to their queues
	Kept     bool // none: another live endpoint speaks for the agent (a rotation)
	Holds    int  // with Kept, how many the agent holds, which stay claimed
}
