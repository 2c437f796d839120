package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// Several serves on one PostgreSQL database are a fleet: each keeps its row in
// the processes table with a heartbeat, and one of them at a time holds the
// reaper's role (store.RoleReaper). On SQLite the one serve does the same, alone,
// on a slower heartbeat: it writes the row every beatSQLite, not every beatFleet.
const (
	beatFleet  = 2 * time.Second  // a dead leader's role moves within leaseBeats+1 of these
	beatSQLite = 30 * time.Second // no one to hand over to: a write every half minute is enough
	leaseBeats = 3                // a role's lease, in heartbeats
)

// fleet is this process's membership: its row, its heartbeat and its roles.
type fleet struct {
	st      *store.Store
	self    store.Process
	every   time.Duration
	alone   bool
	modules func() []store.ProcessModule // this process's module states
	onLead  func()                       // called when this process takes the reaper's role
	log     *slog.Logger
	now     func() time.Time // this process's clock, for leadUntil (time.Now)
	// leadUntil is when this process's hold on the reaper's role ends by its own
	// clock: the lease of its last good heartbeat, counted from before that
	// heartbeat was sent (so never later than the lease the database holds).
	// nil: it does not lead.
	leadUntil atomic.Pointer[time.Time]
	failing   bool // a heartbeat failed and said so; quiet until one succeeds
	leading   bool // the last heartbeat held the reaper's role (its lease may have run out since)
}

func newFleet(st *store.Store, version string, logger *slog.Logger) *fleet {
	host, _ := os.Hostname()
	host = strings.ToValidUTF8(host, "\uFFFD") // PostgreSQL text holds UTF-8 only; a host name is bytes
	var b [6]byte
	rand.Read(b[:])
	f := &fleet{st: st, every: beatFleet, alone: !st.OnPostgres(), log: logger,
		self:    store.Process{ID: hex.EncodeToString(b[:]), Host: host, PID: os.Getpid(), Version: version},
		modules: func() []store.ProcessModule { return nil }, onLead: func() {}, now: time.Now}
	if f.alone {
		f.every = beatSQLite
	}
	return f
}

// Leads reports whether this process holds the reaper's role now: its last good
// heartbeat took it and that heartbeat's lease has not run out meanwhile (a
// process paused or with a hung heartbeat stops leading when its lease ends,
// as the other processes see it).
func (f *fleet) Leads() bool {
	until := f.leadUntil.Load()
	return until != nil && f.now().Before(*until)
}

// join registers this process and makes its first heartbeat, before the
// background jobs start: the reaper then knows at once whether it leads.
func (f *fleet) join(ctx context.Context) {
	f.self.StartedAt = f.st.Now()
	if err := f.st.RegisterProcess(ctx, f.self); err != nil {
		f.log.Warn("register this process; trying again on the next heartbeat", "err", err)
		return
	}
	f.beat(ctx)
}

// run beats every interval until ctx ends, then removes this process's row and
// gives up its roles, so that another process takes them at once.
func (f *fleet) run(ctx context.Context) {
	t := time.NewTicker(f.every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			f.leadUntil.Store(nil)
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := f.st.RemoveProcess(cctx, f.self.ID); err != nil {
				f.log.Warn("remove this process's row; it ages out", "err", err)
			}
			return
		case <-t.C:
			f.beat(ctx)
		}
	}
}

// beat renews this process's row and its roles. A row that is gone (a heartbeat
// so late that the others deleted it) is written again. While heartbeats fail,
// this process does not lead: a missed reaper pass does no harm, two at once
// none either, but the role's lease is no longer this process's to trust.
func (f *fleet) beat(ctx context.Context) {
	b := store.Beat{Modules: f.modules(), Roles: []string{store.RoleReaper}, LeaseFor: leaseBeats * f.every, Alone: f.alone}
	until := f.now().Add(b.LeaseFor) // read before the beat: the lease is written after
	held, err := f.st.ProcessBeat(ctx, f.self.ID, b)
	if errors.Is(err, store.ErrNotFound) {
		if err = f.st.RegisterProcess(ctx, f.self); err == nil {
			held, err = f.st.ProcessBeat(ctx, f.self.ID, b)
		}
	}
	if err != nil {
		if ctx.Err() == nil && !f.failing {
			f.log.Warn("heartbeat failed; this process leaves the reaper to others until one succeeds", "err", err)
		}
		f.failing = true
		held = nil
	} else {
		f.failing = false
	}
	lead := slices.Contains(held, store.RoleReaper)
	// Whether the last heartbeat led, not whether its lease still runs: a
	// process paused past its lease (SIGSTOP) steps back as well, and says so.
	was := f.leading
	f.leading = lead
	if lead {
		f.leadUntil.Store(&until)
	} else {
		f.leadUntil.Store(nil)
	}
	if lead && !was {
		f.log.Info("this process runs the reaper", "process", f.self.ID)
		f.onLead()
	} else if was && !lead && !f.alone && !f.failing {
		// A failed heartbeat has said already that this process stepped back.
		f.log.Info("this process no longer runs the reaper; another does", "process", f.self.ID,
			"leader", f.leader(ctx))
	}
}

// leader names the process that holds the reaper's role, as the processes'
// rows say ("none", or "unknown" if they cannot be read).
func (f *fleet) leader(ctx context.Context) string {
	list, err := f.st.ListProcesses(ctx)
	if err != nil {
		return "unknown"
	}
	for _, p := range list {
		if slices.Contains(p.Roles, store.RoleReaper) {
			return p.ID
		}
	}
	return "none"
}
