package agent

import (
	"context"
	"log/slog"
	"time"

	"github.com/switchboardhq/switchboard/internal/logevery"
)

// mcpStrayResponse is the message mcp-go logs, at ERROR and with the session's
// id in its error, for every JSON-RPC response a client posts that answers no
// request of the server's. Switchboard sends clients no requests, so each one is
// a client's mistake (or a flood): it is the client's to hear about, in its 4xx,
// not a server error, and the session id is the session's key.
const mcpStrayResponse = "Failed to handle sampling response"

// strayResponseLogEvery: a client that loops on stray responses gets one line
// this often, with the count refused since the last.
const strayResponseLogEvery = time.Minute

// transportLogger is the logger mcp-go's HTTP transport logs through: log's
// handler, except that stray responses become a throttled WARN on log.
func transportLogger(log *slog.Logger, now func() time.Time) *slog.Logger {
	return slog.New(transportHandler{Handler: log.Handler(), log: log, now: now,
		stray: &logevery.Counter[struct{}]{Every: strayResponseLogEvery}})
}

type transportHandler struct {
	slog.Handler
	log   *slog.Logger
	now   func() time.Time
	stray *logevery.Counter[struct{}]
}

func (h transportHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Message != mcpStrayResponse {
		return h.Handler.Handle(ctx, r)
	}
	if n := h.stray.Note(struct{}{}, h.now()); n > 0 {
		h.log.Warn("clients posted JSON-RPC responses that answer no request of this server's (it sends none); they were refused",
			"refused", n, "next_report_after", strayResponseLogEvery.String())
	}
	return nil
}

func (h transportHandler) WithAttrs(as []slog.Attr) slog.Handler {
	h.Handler = h.Handler.WithAttrs(as)
	return h
}

func (h transportHandler) WithGroup(name string) slog.Handler {
	h.Handler = h.Handler.WithGroup(name)
	return h
}
