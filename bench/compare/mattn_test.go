//go:build cgo

package compare

import _ "github.com/mattn/go-sqlite3"

// With cgo, goqite also runs on mattn/go-sqlite3, the C SQLite its README uses.
func init() {
	drivers = append(drivers, driver{"sqlite3", func(path string) string {
		return "file:" + path + "?_busy_timeout=5000&_journal_mode=WAL&_synchronous=FULL&_txlock=immediate"
	}})
}
