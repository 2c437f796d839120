package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// Run serves on lns until ctx ends, then shuts down in order: stop accepting and
// let in-flight requests finish within the bound, stop background jobs, close the
// store (Close). systemd hears READY=1 once the listeners are open and everything
// has started.
func (s *Server) Run(ctx context.Context, lns ...net.Listener) error {
	// SIGHUP (systemctl reload) restarts the capability modules: a module's new
	// executable or definitions without a restart of serve and its sessions. It
	// is taken in hand before READY=1, after which systemd may send it at once
	// (a reload queued behind the start); its default action ends the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	s.startBackground(ctx)
	errc := make(chan error, len(lns))
	for _, ln := range lns {
		go func() { errc <- s.http.Serve(ln) }()
		s.log.Info("serving", "addr", ln.Addr().String(), "db", s.store.Path())
	}
	notify(s.log, "READY=1")
	notify(s.log, "STATUS="+s.StatusLine(ctx))
	s.goBG(func() { superviseSystemd(s.bgCtx, s.log, 30*time.Second, s.StatusLine, s.store.Ping) })
	s.goBG(func() { s.restartOnHUP(hup) })
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	notify(s.log, "STOPPING=1")
	s.log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	if err := s.http.Shutdown(sctx); err != nil {
		s.log.Warn("in-flight requests did not finish in time", "err", err)
		s.http.Close()
	}
	s.Close()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return fmt.Errorf("http: %w", serveErr)
	}
	return nil
}

func (s *Server) restartOnHUP(hup <-chan os.Signal) {
	for {
		select {
		case <-s.bgCtx.Done():
			return
		case <-hup:
			s.log.Info("SIGHUP: restarting the capability modules")
			s.modules.restartAll()
		}
	}
}

// startBackground starts the jobs that run beside the HTTP server.
func (s *Server) startBackground(ctx context.Context) {
	ctx, s.cancel = context.WithCancel(ctx)
	s.bgCtx = ctx
	s.fleet.join(ctx)
	s.goBG(func() { s.fleet.run(ctx) })
	// The watch's baseline is taken here, before the first request is answered:
	// taken later, a todo another process added meanwhile would count as seen
	// and ring no agent already waiting.
	if watch, err := s.store.BeginWatchForeign(ctx); err != nil {
		s.log.Error("foreign commit watcher not started", "err", err)
	} else {
		s.goBG(func() {
			if err := watch(500 * time.Millisecond); err != nil {
				s.log.Error("foreign commit watcher stopped", "err", err)
			}
		})
	}
	s.goBG(func() { s.agent.Run(ctx) })
	s.goBG(func() {
		// Backoffs a restart left untimed still ring when they end.
		if n, err := s.store.LoadBackoffs(ctx); err != nil {
			s.log.Warn("load the backoffs of failed todos", "err", err)
		} else if n > 0 {
			s.log.Info("timing the backoffs of failed todos", "todos", n)
		}
	})
	s.goBG(func() { s.modules.run(ctx, s.agent) })
	s.goBG(func() { s.reaper.Run(ctx) })
	s.goBG(func() { s.charts.Run(ctx) })
	s.goBG(func() { s.maintain(ctx, 5*time.Minute) })
}

// maintain checkpoints the WAL and refreshes planner statistics periodically.
func (s *Server) maintain(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.store.Maintain(ctx); err != nil && ctx.Err() == nil {
				s.log.Warn("database maintenance failed", "err", err)
			}
		}
	}
}

func (s *Server) goBG(fn func()) {
	s.bg.Add(1)
	go func() { defer s.bg.Done(); fn() }()
}

// Close stops the background jobs and the modules, closes the store and lets
// another serve open the database. Run ends with it; a server that was never
// Run must be closed by its maker. Closing twice is closing once.
func (s *Server) Close() error {
	var err error
	s.closeOnce.Do(func() {
		if s.cancel != nil {
			s.cancel()
		}
		s.bg.Wait()
		// Modules audit their shutdown, so they stop before the store closes.
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
		s.modules.close(ctx)
		cancel()
		if err = s.store.Close(); err != nil {
			s.log.Error("close store", "err", err)
		}
		s.unlock()
	})
	return err
}
