package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Several serve processes may share one PostgreSQL database (a fleet). Each keeps
// a row in processes, written when it starts and on every heartbeat, so that the
// board can say which are alive, with which version and module states. A job only
// one of them may do at a time (the reaper) is a role in leaders, held by one
// process until a lease that its heartbeats renew; when the holder dies, the
// lease lapses and the next process to beat takes the role. On SQLite there is
// one serve (LockForServe): the same rows, one of them, and it always leads.

// RoleReaper is the role of the process that reaps expired leases and prunes.
const RoleReaper = "reaper"

// processForget is how long the row of a process that stopped beating is kept,
// shown as gone, before a live process deletes it.
const processForget = time.Hour

// Process is one serve process as its row says.
type Process struct {
	ID          string // the instance id, new at each start
	Host        string
	PID         int
	Version     string
	StartedAt   time.Time
	HeartbeatAt time.Time
	Modules     []ProcessModule
	Roles       []string // the roles it holds (RoleReaper), lease unexpired
}

// ProcessModule is a capability module's state in one process.
type ProcessModule struct {
	Name  string `json:"name"`
	State string `json:"state"`
	Error string `json:"error,omitempty"`
}

// Beat is what a process says on each heartbeat.
type Beat struct {
	Modules []ProcessModule
	// Roles are the roles it takes or keeps, each for LeaseFor from now.
	Roles    []string
	LeaseFor time.Duration
	// Alone says no other process can hold a role (SQLite's one serve): one left
	// by a process that crashed is taken at once, not after its lease.
	Alone bool
}

// RegisterProcess writes p's row (its start and first heartbeat).
func (s *Store) RegisterProcess(ctx context.Context, p Process) error {
	mods, err := json.Marshal(orEmpty(p.Modules))
	if err != nil {
		return fmt.Errorf("store: register process: %w", err)
	}
	err = s.write(ctx, func(w *wtx) error {
		_, err := w.exec(`INSERT INTO processes (id, host, pid, version, started_at, heartbeat_at, modules)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, p.ID, p.Host, p.PID, p.Version, ms(p.StartedAt), ms(w.now), string(mods))
		return err
	})
	if err != nil {
		return fmt.Errorf("store: register process %s: %w", p.ID, err)
	}
	return nil
}

// ProcessBeat renews process id's row and takes or keeps each role in b.Roles
// whose lease is free, lapsed or its own; it returns the roles the process holds
// now. It also deletes the rows of processes silent for processForget. A row
// deleted meanwhile (its process was thought dead) is not written again: the
// error says so, and the process registers anew.
func (s *Store) ProcessBeat(ctx context.Context, id string, b Beat) (held []string, err error) {
	mods, err := json.Marshal(orEmpty(b.Modules))
	if err != nil {
		return nil, fmt.Errorf("store: heartbeat: %w", err)
	}
	err = s.write(ctx, func(w *wtx) error {
		held = held[:0]
		res, err := w.exec(`UPDATE processes SET heartbeat_at = ?, modules = ? WHERE id = ?`, ms(w.now), string(mods), id)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil || n == 0 {
			return ErrNotFound
		}
		now, err := w.leaseClock()
		if err != nil {
			return err
		}
		for _, role := range b.Roles {
			// Another's standing lease is read without a lock and left alone: an
			// upsert locks the row even when its WHERE refuses the update, and this
			// beat shares its transaction with other requests (claims lock
			// queue_counts rows), so every process locking the row every beat could
			// deadlock against the holder's batch. Only a renewal or a take-over locks.
			var holder string
			var expires int64
			err := w.queryRow(`SELECT process_id, expires_at FROM leaders WHERE role = ?`, role).Scan(&holder, &expires)
			if err != nil && !notFound(err) {
				return err
			}
			if err == nil && holder != id && expires > now && !b.Alone {
				continue
			}
			if _, err := w.exec(`INSERT INTO leaders (role, process_id, expires_at) VALUES (?, ?, ?)
				ON CONFLICT (role) DO UPDATE SET process_id = excluded.process_id, expires_at = excluded.expires_at
				WHERE leaders.process_id = excluded.process_id OR leaders.expires_at <= ? OR ? = 1`,
				role, id, now+b.LeaseFor.Milliseconds(), now, boolInt(b.Alone)); err != nil {
				return err
			}
			if err := w.queryRow(`SELECT process_id FROM leaders WHERE role = ?`, role).Scan(&holder); err != nil {
				return err
			}
			if holder == id {
				held = append(held, role)
			}
		}
		_, err = w.exec(`DELETE FROM processes WHERE heartbeat_at < ?`, ms(w.now.Add(-processForget)))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("store: heartbeat of process %s: %w", id, err)
	}
	return held, nil
}

// pgClockMS is the database's clock in milliseconds, as a PostgreSQL expression.
// pgServingCount counts the processes that beat on the schema in the last
// minute: serves running on it.
const pgServingCount = `SELECT count(*) FROM processes WHERE heartbeat_at > ` + pgClockMS + ` - 60000`

const pgClockMS = `CAST(extract(epoch FROM clock_timestamp()) * 1000 AS BIGINT)`

// leaseClock is the time, in ms, that roles' leases are taken, renewed and
// checked by. On PostgreSQL it is the database's clock: processes on hosts whose
// clocks disagree still agree on whose lease is live, so two never both lead. On
// SQLite, the one serve's clock.
func (w *wtx) leaseClock() (int64, error) {
	if !w.w.s.pg {
		return ms(w.now), nil
	}
	var now int64
	if err := w.queryRow(`SELECT ` + pgClockMS).Scan(&now); err != nil {
		return 0, fmt.Errorf("read the database's clock: %w", err)
	}
	return now, nil
}

// RemoveProcess deletes process id's row and gives up its roles, as it stops:
// another process takes them on its next heartbeat, not after the lease.
func (s *Store) RemoveProcess(ctx context.Context, id string) error {
	err := s.write(ctx, func(w *wtx) error {
		if _, err := w.exec(`DELETE FROM leaders WHERE process_id = ?`, id); err != nil {
			return err
		}
		_, err := w.exec(`DELETE FROM processes WHERE id = ?`, id)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: remove process %s: %w", id, err)
	}
	return nil
}

// ListProcesses returns the processes' rows, the most recently started first,
// each with the roles it holds.
func (s *Store) ListProcesses(ctx context.Context) ([]Process, error) {
	// A lease is live by the clock it was taken by (see leaseClock).
	leaseNow, args := "?", []any{ms(s.now())}
	if s.pg {
		leaseNow, args = pgClockMS, nil
	}
	rows, err := s.query(ctx, `SELECT p.id, p.host, p.pid, p.version, p.started_at, p.heartbeat_at, p.modules,
			coalesce(l.role, '')
		FROM processes p LEFT JOIN leaders l ON l.process_id = p.id AND l.expires_at > `+leaseNow+`
		ORDER BY p.started_at DESC, p.id, l.role`, args...)
	if err != nil {
		return nil, fmt.Errorf("store: list processes: %w", err)
	}
	defer rows.Close()
	var out []Process
	for rows.Next() {
		var p Process
		var started, beat int64
		var mods, role string
		if err := rows.Scan(&p.ID, &p.Host, &p.PID, &p.Version, &started, &beat, &mods, &role); err != nil {
			return nil, fmt.Errorf("store: list processes: %w", err)
		}
		if n := len(out); n > 0 && out[n-1].ID == p.ID {
			out[n-1].Roles = append(out[n-1].Roles, role)
			continue
		}
		p.StartedAt, p.HeartbeatAt = fromMS(started), fromMS(beat)
		if err := json.Unmarshal([]byte(mods), &p.Modules); err != nil {
			return nil, fmt.Errorf("store: process %s: modules: %w", p.ID, err)
		}
		if role != "" {
			p.Roles = []string{role}
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: list processes: %w", err)
	}
	return out, nil
}

// orEmpty is list, or an empty one where it is nil, so that JSON says [].
func orEmpty[T any](list []T) []T {
	if list == nil {
		return []T{}
	}
	return list
}
