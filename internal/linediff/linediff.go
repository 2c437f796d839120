// Package linediff compares two texts line by line, for a human reviewing what
// changed between them: a module tool's approved definition and its new one.
package linediff

import (
	"strconv"
	"strings"
)

// Op says what a Line of a comparison is.
type Op byte

const (
	Same    Op = ' ' // in both texts
	Removed Op = '-' // in the old text only
	Added   Op = '+' // in the new text only
	Skipped Op = '~' // Skip unchanged lines left out (Context)
)

// Line is one line of a comparison.
type Line struct {
	Op   Op
	Text string
	Skip int // for Skipped: how many unchanged lines it stands for
}

// String is the line as a unified diff writes it ("- text", "+ text", "  text"),
// or, for Skipped, how many lines were left out.
func (l Line) String() string {
	if l.Op == Skipped {
		if l.Skip == 1 {
			return "  … 1 unchanged line"
		}
		return "  … " + strconv.Itoa(l.Skip) + " unchanged lines"
	}
	return string(l.Op) + " " + l.Text
}

// maxCells bounds the table the longest common subsequence is found in (4 bytes
// a cell): past it, the changed middle of the texts is shown as removed, then
// added, whole.
const maxCells = 1 << 22

// Lines compares old and new by lines: every line of old is Same or Removed,
// every line of new Same or Added, in order, with as many Same as can be.
func Lines(old, new string) []Line {
	a, b := split(old), split(new)
	var out []Line
	// The common start and end need no table; definitions mostly change little.
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	for _, t := range a[:p] {
		out = append(out, Line{Op: Same, Text: t})
	}
	out = append(out, middle(a[p:len(a)-s], b[p:len(b)-s])...)
	for _, t := range a[len(a)-s:] {
		out = append(out, Line{Op: Same, Text: t})
	}
	return out
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

// middle compares a and b through the table of their longest common
// subsequences' lengths, the removals of a run before its additions.
func middle(a, b []string) []Line {
	n, m := len(a), len(b)
	out := make([]Line, 0, n+m)
	if n*m > maxCells {
		for _, t := range a {
			out = append(out, Line{Op: Removed, Text: t})
		}
		for _, t := range b {
			out = append(out, Line{Op: Added, Text: t})
		}
		return out
	}
	// lcs[i*(m+1)+j] is the length of the longest common subsequence of a[i:]
	// and b[j:].
	lcs := make([]int32, (n+1)*(m+1))
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i*(m+1)+j] = lcs[(i+1)*(m+1)+j+1] + 1
			} else {
				lcs[i*(m+1)+j] = max(lcs[(i+1)*(m+1)+j], lcs[i*(m+1)+j+1])
			}
		}
	}
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && a[i] == b[j]:
			out = append(out, Line{Op: Same, Text: a[i]})
			i, j = i+1, j+1
		case j == m || (i < n && lcs[(i+1)*(m+1)+j] >= lcs[i*(m+1)+j+1]):
			out = append(out, Line{Op: Removed, Text: a[i]})
			i++
		default:
			out = append(out, Line{Op: Added, Text: b[j]})
			j++
		}
	}
	return out
}

// minSkip is the most unchanged lines Context shows rather than leave out: a line
// saying that two or three were left out would save the reader nothing.
const minSkip = 3

// Context keeps, of a comparison, the changed lines and up to n unchanged lines
// either side of each; every longer run of unchanged lines, where more than
// minSkip would be left out, becomes one Skipped line. A comparison with no
// change comes back as it went in.
func Context(lines []Line, n int) []Line {
	if !Changed(lines) {
		return lines
	}
	var out []Line
	for i := 0; i < len(lines); {
		if lines[i].Op != Same {
			out = append(out, lines[i])
			i++
			continue
		}
		j := i
		for j < len(lines) && lines[j].Op == Same {
			j++
		}
		// lines[i:j] is a run of unchanged lines: keep n after a change before
		// it, n before a change after it.
		head, tail := n, n
		if i == 0 {
			head = 0
		}
		if j == len(lines) {
			tail = 0
		}
		if j-i-head-tail <= minSkip {
			out = append(out, lines[i:j]...)
		} else {
			out = append(out, lines[i:i+head]...)
			out = append(out, Line{Op: Skipped, Skip: j - i - head - tail})
			out = append(out, lines[j-tail:j]...)
		}
		i = j
	}
	return out
}

// Changed reports whether the comparison has a removed or added line.
func Changed(lines []Line) bool {
	for _, l := range lines {
		if l.Op == Removed || l.Op == Added {
			return true
		}
	}
	return false
}
