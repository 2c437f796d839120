package agent

import "strconv"

// pageArgs checks the limit and cursor arguments every list verb takes. limit
// defaults to def and is capped at most; the cursor is the id the previous page
// ended on (its next_cursor), and before is 0 on the first page.
func pageArgs(limit *int64, cursor string, def, most int) (n int, before int64, err error) {
	n = def
	if limit != nil {
		if *limit < 1 {
			return 0, 0, errorf(CodeInvalidArgument, "limit must be at least 1")
		}
		n = int(min(*limit, int64(most)))
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
