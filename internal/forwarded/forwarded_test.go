package forwarded

import (
	"net/http"
	"slices"
	"testing"
)

func TestFor(t *testing.T) {
	for _, c := range []struct {
		lines []string
		all   []string
		last  string
	}{
		{nil, nil, ""},
		{[]string{"203.0.113.5"}, []string{"203.0.113.5"}, "203.0.113.5"},
		{[]string{"10.0.0.1, 203.0.113.5"}, []string{"10.0.0.1", "203.0.113.5"}, "203.0.113.5"},
		// A client's forged line first, the proxy's own line after it.
		{[]string{"127.0.0.1", "203.0.113.5"}, []string{"127.0.0.1", "203.0.113.5"}, "203.0.113.5"},
		{[]string{" , 127.0.0.1,", ""}, []string{"127.0.0.1"}, "127.0.0.1"},
	} {
		h := http.Header{}
		for _, l := range c.lines {
			h.Add("X-Forwarded-For", l)
		}
		if got := For(h); !slices.Equal(got, c.all) {
			t.Errorf("For(%q) = %q, want %q", c.lines, got, c.all)
		}
		if got := LastHop(h); got != c.last {
			t.Errorf("LastHop(%q) = %q, want %q", c.lines, got, c.last)
		}
	}
}
