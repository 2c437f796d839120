package agent

import (
	"fmt"
	"strconv"

	"github.com/mark3labs/mcp-go/mcp"
)

// Page sizes of every list verb.
const (
	defaultPageLimit = 50
	maxPageLimit     = 200
)

// limitArg and cursorArg declare the paging arguments every list verb takes.
func limitArg() mcp.ToolOption {
	return mcp.WithInteger("limit", mcp.Min(1), mcp.Max(maxPageLimit), mcp.DefaultNumber(defaultPageLimit),
		mcp.Description(fmt.Sprintf("Rows per page, 1 to %d.", maxPageLimit)))
}

func cursorArg() mcp.ToolOption {
	return mcp.WithString("cursor", mcp.Description("The next_cursor of the previous page."))
}

// nextCursor is the cursor of the page that starts before the given id (what
// store.PageOf returns): "" when there is none.
func nextCursor(older int64) string {
	if older == 0 {
		return ""
	}
	return strconv.FormatInt(older, 10)
}

// pageArgs checks the limit and cursor arguments. limit defaults to
// defaultPageLimit and is capped at maxPageLimit; the cursor is the id the previous
// page ended on (its next_cursor), and before is 0 on the first page.
func pageArgs(limit *int64, cursor string) (n int, before int64, err error) {
	n = defaultPageLimit
	if limit != nil {
		if *limit < 1 {
			return 0, 0, errorf(CodeInvalidArgument, "limit must be at least 1")
		}
		n = int(min(*limit, int64(maxPageLimit)))
	}
	if cursor != "" {
		v, err := strconv.ParseInt(cursor, 10, 64)
		if err != nil || v < 1 {
			return 0, 0, errorf(CodeInvalidArgument, "cursor %q is not one this server issued", cursor)
		}
		before = v
	}
	return n, before, nil
}
