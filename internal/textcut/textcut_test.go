package textcut

import (
	"testing"
	"unicode/utf8"
)

func TestPrefix(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
		cut  bool
	}{{"abc", 5, "abc", false}, {"abc", 2, "ab", true}, {"aé", 2, "a", true}, {"aé", 3, "aé", false},
		{"日本", 4, "日", true}, {"日本", 2, "", true}, {"abc", 0, "", true}} {
		if got, cut := Prefix(c.in, c.n); got != c.want || cut != c.cut {
			t.Errorf("Prefix(%q, %d) = %q, %v; want %q, %v", c.in, c.n, got, cut, c.want, c.cut)
		}
	}
}

func TestBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{{"short", 10, "short"}, {"exactly10!", 10, "exactly10!"}, {"0123456789ab", 10, "0123456…"},
		{"panic: runtime error at process.go:42", 20, "panic: runtime er…"},
		{"ééééééé", 8, "éé…"}, // 14 bytes; a cut at 5 would split an é
		{"aaaaa日本", 10, "aaaaa…"}} {
		got := Bytes(c.in, c.n)
		if got != c.want || len(got) > c.n || !utf8.ValidString(got) {
			t.Errorf("Bytes(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}

func TestRunes(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{{"日本語", 3, "日本語"}, {"日本語です", 3, "日本…"}, {"ab cd", 4, "ab…"}, {"abcdef", 1, "…"}} {
		if got := Runes(c.in, c.n); got != c.want {
			t.Errorf("Runes(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
