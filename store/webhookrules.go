package store

import (
	"context"
	"fmt"

	"github.com/switchboardhq/switchboard/internal/textcut"
)

// SetWebhookRules replaces a live webhook's rules (JSON, checked by the caller
// with ingest.ParseRules; empty removes them). endpointID confines the change to
// that endpoint's webhooks (0: any, a human's). The receiver applies them from
// the next delivery on: one recorded against rules that changed since it read
// them is ErrStale, and read again.
func (s *Store) SetWebhookRules(ctx context.Context, id, endpointID int64, rules []byte, actor string) (Webhook, error) {
	err := s.write(ctx, func(w *wtx) error {
		res, err := w.exec(`UPDATE webhooks SET rules = ? WHERE id = ? AND deleted_at IS NULL AND `+scoped,
			string(rules), id, endpointID, endpointID)
		if err != nil {
			return fmt.Errorf("store: update webhook %d: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("store: update webhook %d: %w", id, ErrNotFound)
		}
		return w.audit(actor, "webhook.update", webhookTarget(id), "", "rules="+textcut.Bytes(string(rules), 200))
	})
	if err != nil {
		return Webhook{}, err
	}
	return s.Webhook(ctx, id)
}
