package cli

import (
	"flag"

	"github.com/switchboardhq/switchboard/store"
)

// searchFlags adds todo list's search flags, the board's search terms, to fs.
func searchFlags(fs *flag.FlagSet, s *store.TodoSearch) {
	fs.StringVar(&s.Key, "key", "", "only the todos made from the delivery with this id (the provider's idempotency key), and its replays, or whose own key is this")
	fs.StringVar(&s.Source, "source", "", "only the todos made by webhook:N (or N), human:… or agent:…, or of this source type (github, manual, replay, …)")
	fs.StringVar(&s.Type, "type", "", "only the todos of this provider event type (push, invoice.paid, …)")
	fs.StringVar(&s.Error, "error", "", "only the todos whose last error contains this text (any case)")
	fs.StringVar(&s.Holder, "holder", "", "only the todos this agent (agent:ID) holds claimed")
}
