package store

// listed is a row of a listing that pages by id, newest first: a todo, a webhook
// event or an audit entry.
type listed interface{ listID() int64 }

func (t Todo) listID() int64         { return t.ID }
func (e WebhookEvent) listID() int64 { return e.ID }
func (a AuditEntry) listID() int64   { return a.ID }

// PageOf cuts rows, listed with a limit of one more than a page, to the page, and
// says where the older page starts: the last kept row's id (the next listing's
// Before), or 0 when there is no older row.
func PageOf[T listed](rows []T, page int) ([]T, int64) {
	if len(rows) <= page {
		return rows, 0
	}
	rows = rows[:page]
	return rows, rows[len(rows)-1].listID()
}
