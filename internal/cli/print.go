package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// What the commands print, written once: JSON for scripts (--json), else a
// table for a person, or the sentence that says why there is nothing to show
// and how to make something.

// table is one list command's rows as a person reads them.
type table[T any] struct {
	header string         // the column names, tab-separated
	row    func(T) string // one row, its cells tab-separated
	none   string         // said in place of an empty table; "" prints the header alone
}

// printList prints rows as JSON when asJSON, else as t says.
func printList[T any](env *environ, asJSON bool, rows []T, t table[T]) error {
	if asJSON {
		return writeJSONList(env, rows)
	}
	if len(rows) == 0 && t.none != "" {
		_, err := fmt.Fprintln(env.stdout, t.none)
		return err
	}
	tw := newTable(env.stdout)
	fmt.Fprintln(tw, t.header)
	for _, r := range rows {
		fmt.Fprintln(tw, t.row(r))
	}
	return tw.Flush()
}

// newTable aligns tab-separated cells in columns two spaces apart.
func newTable(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// writeJSONList writes a list, as [] when it is empty (never null).
func writeJSONList[T any](env *environ, list []T) error {
	if list == nil {
		list = []T{}
	}
	return writeJSON(env, list)
}

func writeJSON(env *environ, v any) error {
	enc := json.NewEncoder(env.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
