package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/switchboardhq/switchboard/store"
)

// systemd integration: readiness, status lines, the watchdog and socket activation.
// Every call is a no-op outside systemd (no NOTIFY_SOCKET, no LISTEN_FDS).

// notify sends one sd_notify state; failures are logged, never fatal.
func notify(log *slog.Logger, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.Warn("sd_notify failed", "state", state, "err", err)
	}
}

// ActivationListeners returns the sockets systemd passed (socket activation), or nil
// when there are none. Every listener passed is served; non-stream sockets are closed.
func ActivationListeners() ([]net.Listener, error) {
	named, err := activation.ListenersWithNames()
	if err != nil {
		return nil, fmt.Errorf("socket activation: %w", err)
	}
	var out []net.Listener
	for _, lns := range named {
		for _, ln := range lns {
			if ln != nil {
				out = append(out, ln)
			}
		}
	}
	return out, nil
}

// superviseSystemd sends STATUS lines every statusEvery and, when systemd set a
// watchdog, WATCHDOG=1 at half its interval — but only after ping (the database)
// answered, so a wedged store gets the service restarted; or said that PostgreSQL
// cannot be reached, which a restart does not mend.
func superviseSystemd(ctx context.Context, log *slog.Logger, statusEvery time.Duration,
	status func(context.Context) string, ping func(context.Context) error) {
	wd, err := daemon.SdWatchdogEnabled(false)
	if err != nil {
		log.Warn("read watchdog settings", "err", err)
	}
	var wdTick <-chan time.Time
	if wd > 0 {
		t := time.NewTicker(wd / 2)
		defer t.Stop()
		wdTick = t.C
	}
	st := time.NewTicker(statusEvery)
	defer st.Stop()
	last, away := "", false
	for {
		select {
		case <-ctx.Done():
			return
		case <-st.C:
			if s := status(ctx); s != last {
				notify(log, "STATUS="+s)
				last = s
			}
		case <-wdTick:
			pctx, cancel := context.WithTimeout(ctx, wd/4)
			err := ping(pctx)
			cancel()
			if errors.Is(err, store.ErrUnreachable) {
				// A restart would not bring PostgreSQL back (serve reconnects
				// by itself when it is), and would fail to start meanwhile.
				if !away {
					log.Error("watchdog: PostgreSQL is away; feeding the watchdog while serve waits for it", "err", err)
				}
				away = true
			} else if err != nil {
				log.Error("watchdog: database did not answer; withholding WATCHDOG=1", "err", err)
				continue
			} else {
				away = false
			}
			notify(log, "WATCHDOG=1")
		}
	}
}
