package cli

// The docs stay true: every `switchboard …` command line in README.md and
// docs/*.md parses against the CLI as built, every flag and variable in
// docs/configuration.md exists, and the pages stay short enough to read.
//
// Only cliHelp touches the CLI's code; everything else reads Markdown or the
// usage text that `-h` prints, so the checks move with the commands.

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// cliHelp is the one tie to the CLI's code: what `switchboard ARGS… -h` prints
// on stdout, run in-process with no environment. Asking for help runs nothing
// and opens no database. An unknown command or subcommand is an error.
func cliHelp(args []string) (string, error) {
	var out, errb bytes.Buffer
	env := &environ{stdin: strings.NewReader(""), stdout: &out, stderr: &errb, getenv: func(string) string { return "" }}
	if code := run(context.Background(), env, append(append([]string(nil), args...), "-h")); code != 0 {
		first, _, _ := strings.Cut(strings.TrimSpace(errb.String()), "\n")
		return "", fmt.Errorf("switchboard %s -h: exit %d: %s", strings.Join(args, " "), code, first)
	}
	return out.String(), nil
}

// flagLine is one flag in a flag set's usage: "  -name" for a switch, "  -name type"
// for a flag that takes a value.
var flagLine = regexp.MustCompile(`^  -([A-Za-z0-9][A-Za-z0-9_-]*)( [a-z]+)?(\t.*)?$`)

// flagsOf is the flag set of the command `switchboard COMMAND…` (such as
// ["todo", "add"]), read from its usage. A group of subcommands ("todo") is
// not a command: it has no flags of its own.
func flagsOf(command []string) (*flag.FlagSet, error) {
	help, err := cliHelp(command)
	if err != nil {
		return nil, err
	}
	_, defaults, ok := strings.Cut(help, "\nflags:\n")
	if !ok {
		return nil, fmt.Errorf("switchboard %s takes a subcommand", strings.Join(command, " "))
	}
	fs := flag.NewFlagSet(strings.Join(command, " "), flag.ContinueOnError)
	for _, line := range strings.Split(defaults, "\n") {
		m := flagLine.FindStringSubmatch(line)
		switch {
		case m == nil:
		case m[2] == "":
			fs.Bool(m[1], false, "")
		default:
			fs.String(m[1], "", "")
		}
	}
	return fs, nil
}

// checkCommand reports whether words (what follows `switchboard` on a line)
// name a command and give it only flags it defines. Values and positional
// arguments are not checked: ID, NAME and FILE are fine placeholders.
func checkCommand(words []string) error {
	if len(words) == 0 {
		return errors.New("no command")
	}
	if isHelpWord(words[0]) {
		return nil // switchboard -h lists the commands
	}
	fs, err := flagsOf(words[:1])
	rest := words[1:]
	if err != nil && len(words) > 1 && !strings.HasPrefix(words[1], "-") {
		fs, err = flagsOf(words[:2])
		rest = words[2:]
	}
	if err != nil {
		return err
	}
	for i := 0; i < len(rest); i++ {
		arg := rest[i]
		if arg == "--" {
			return nil
		}
		if len(arg) < 2 || arg[0] != '-' {
			continue
		}
		name, _, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if isHelpWord(arg) {
			continue
		}
		f := fs.Lookup(name)
		if f == nil {
			return fmt.Errorf("switchboard %s has no flag --%s", fs.Name(), name)
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() || hasValue {
			continue
		}
		if i+1 == len(rest) {
			return fmt.Errorf("switchboard %s: --%s needs a value", fs.Name(), name)
		}
		i++
	}
	return nil
}

func isHelpWord(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}

// docFiles are the pages a user reads: README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no docs/*.md (%v)", err)
	}
	return append([]string{"README.md"}, pages...)
}

func readDoc(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// docLine is one logical line of a shell code block, where it starts.
type docLine struct {
	file string
	line int
	text string
}

func (l docLine) String() string { return fmt.Sprintf("%s:%d: %s", l.file, l.line, l.text) }

var shellBlock = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true}

// shellLines returns the lines of the doc's shell code blocks (a fence with no
// language or sh, bash, shell, console: output is fenced as text), with lines
// continued by a trailing backslash joined.
func shellLines(file, doc string) []docLine {
	var lines []docLine
	inBlock, shell := false, false
	var cont *docLine
	for i, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			inBlock = !inBlock
			shell = inBlock && shellBlock[strings.TrimSpace(strings.TrimPrefix(trimmed, "```"))]
			cont = nil
			continue
		}
		if !inBlock || !shell {
			continue
		}
		if cont != nil {
			cont.text += " " + trimmed
		} else {
			lines = append(lines, docLine{file: file, line: i + 1, text: trimmed})
			cont = &lines[len(lines)-1]
		}
		if strings.HasSuffix(cont.text, `\`) {
			cont.text = strings.TrimSuffix(cont.text, `\`)
		} else {
			cont = nil
		}
	}
	return lines
}

// shellWords splits a shell line into simple commands, each a list of words,
// as far as the docs need: quotes, comments, pipes and lists, $(…), and
// redirections (dropped with their target).
func shellWords(line string) [][]string {
	var cmds [][]string
	var words []string
	var word strings.Builder
	inWord, redirect := false, false
	endWord := func() {
		if inWord {
			if !redirect {
				words = append(words, word.String())
			}
			redirect = false
		}
		word.Reset()
		inWord = false
	}
	endCmd := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				end = len(line) - i - 1
			}
			word.WriteString(line[i+1 : i+1+end])
			inWord = true
			i += end + 1
		case c == '\\' && i+1 < len(line):
			word.WriteByte(line[i+1])
			inWord = true
			i++
		case c == '#' && !inWord:
			endCmd()
			return cmds
		case c == ' ' || c == '\t':
			endWord()
		case c == '$' && i+1 < len(line) && line[i+1] == '(':
			endCmd()
			i++
		case strings.IndexByte("|&;(){}", c) >= 0:
			endCmd()
		case c == '<' || c == '>':
			if inWord && strings.Trim(word.String(), "0123456789") == "" {
				word.Reset() // a file descriptor, as in 2>
				inWord = false
			}
			endWord()
			for i+1 < len(line) && strings.IndexByte("<>&", line[i+1]) >= 0 {
				i++
			}
			redirect = true
			inWord = false
		default:
			word.WriteByte(c)
			inWord = true
		}
	}
	endCmd()
	return cmds
}

// switchboardArgs returns what follows the program in a simple command that
// runs Switchboard (switchboard, ./switchboard, go run .), after any variable
// assignments and sudo; ok is false for any other command.
func switchboardArgs(words []string) (args []string, ok bool) {
	for len(words) > 0 {
		switch w := words[0]; {
		case strings.Contains(w, "=") && !strings.HasPrefix(w, "-"):
			words = words[1:]
		case w == "sudo" || w == "exec" || w == "time" || w == "export":
			words = words[1:]
			for len(words) > 0 && strings.HasPrefix(words[0], "-") {
				if words[0] == "-u" && len(words) > 1 {
					words = words[1:]
				}
				words = words[1:]
			}
		case w == "switchboard" || w == "./switchboard" || strings.HasSuffix(w, "/switchboard"):
			return words[1:], true
		case w == "go" && len(words) > 2 && words[1] == "run" && words[2] == ".":
			return words[3:], true
		default:
			return nil, false
		}
	}
	return nil, false
}

// inlineCommands returns the code spans in the doc's prose that are whole
// Switchboard command lines, such as `switchboard todo show ID`. A span that
// stands for many (`switchboard <command> -h`, `[--json]`) is left out.
func inlineCommands(file, doc string) []docLine {
	var lines []docLine
	inBlock := false
	for i, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inBlock = !inBlock
			continue
		}
		if inBlock {
			continue
		}
		for _, span := range codeSpans(line) {
			if (strings.HasPrefix(span, "switchboard ") || strings.HasPrefix(span, "go run . ")) &&
				!strings.ContainsAny(span, "<[") {
				lines = append(lines, docLine{file: file, line: i + 1, text: span})
			}
		}
	}
	return lines
}

// docCommands returns every Switchboard command line in the docs' shell blocks
// and code spans.
func docCommands(t *testing.T) map[docLine][]string {
	t.Helper()
	found := map[docLine][]string{}
	for _, file := range docFiles(t) {
		doc := readDoc(t, file)
		for _, line := range append(shellLines(file, doc), inlineCommands(file, doc)...) {
			for _, words := range shellWords(line.text) {
				if args, ok := switchboardArgs(words); ok {
					l := line
					l.text = strings.Join(words, " ")
					found[l] = args
				}
			}
		}
	}
	return found
}

func TestDocsCommandLinesParse(t *testing.T) {
	t.Chdir("../..") // the pages and the source are read from the repository's root
	commands := docCommands(t)
	// A checker that finds nothing passes everything: the docs hold dozens.
	if len(commands) < 30 {
		t.Fatalf("found %d switchboard command lines in the docs, want at least 30", len(commands))
	}
	for line, args := range commands {
		if len(args) == 0 {
			continue // the program alone, as in `sudo switchboard` (none today)
		}
		if err := checkCommand(args); err != nil {
			t.Errorf("%s\n\t%v", line, err)
		}
	}
}

// TestDocsCheckerCatchesMistakes keeps the checker above honest: a misspelt
// flag, a flag of another command, an unknown subcommand and a group used
// as a command are all caught, and placeholders are not.
func TestDocsCheckerCatchesMistakes(t *testing.T) {
	t.Chdir("../..") // the pages and the source are read from the repository's root
	good := []string{
		`./switchboard todo add --queue inbox --payload '{"pr": 42}' --json`,
		`ID=$(./switchboard todo add --queue inbox - < p.json) # a comment --nope`,
		`echo "$PASSWORD" | sudo -u switchboard switchboard admin create --username ana --db "$DB"`,
		`go run . serve --listen=127.0.0.1:0 2>&1 >serve.log`,
		`switchboard todo show ID --json`,
		`switchboard modules approve everything everything_echo --hash SHA256`,
		`switchboard webhook events 3 --limit 10`,
		`switchboard version`,
	}
	for _, line := range good {
		cmds := shellWords(line)
		n := 0
		for _, words := range cmds {
			if args, ok := switchboardArgs(words); ok {
				n++
				if err := checkCommand(args); err != nil {
					t.Errorf("%s: %v", line, err)
				}
			}
		}
		if n != 1 {
			t.Errorf("%s: found %d switchboard commands in %q, want 1", line, n, cmds)
		}
	}
	for _, line := range []string{
		`switchboard todo add --queu inbox`,
		`switchboard todo list --grace 1h`,
		`switchboard todo frobnicate 3`,
		`switchboard todo --json`,
		`switchboard serve --listen`,
		`switchboard nosuchcommand`,
	} {
		args, _ := switchboardArgs(shellWords(line)[0])
		if err := checkCommand(args); err == nil {
			t.Errorf("%s: accepted", line)
		}
	}
}

// configRows are the rows of docs/configuration.md's table, each a map from
// the header's column names to the cell.
func configRows(t *testing.T) []map[string]string {
	t.Helper()
	var header []string
	var rows []map[string]string
	for _, line := range strings.Split(readDoc(t, "docs/configuration.md"), "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		switch {
		case header == nil:
			header = cells
		case strings.HasPrefix(cells[0], "---"):
		default:
			row := map[string]string{}
			for i, name := range header {
				if i < len(cells) {
					row[name] = cells[i]
				}
			}
			rows = append(rows, row)
		}
	}
	for _, col := range []string{"flag", "variable", "commands"} {
		if len(rows) == 0 || !strings.Contains(strings.Join(header, "|"), col) {
			t.Fatalf("docs/configuration.md: no table with a %q column (header %q, %d rows)", col, header, len(rows))
		}
	}
	return rows
}

var (
	codeSpan = regexp.MustCompile("`([^`]+)`")
	envName  = regexp.MustCompile(`\bSWITCHBOARD_[A-Z0-9_]+\b`)
)

// codeSpans returns the backquoted texts in a Markdown cell.
func codeSpans(cell string) []string {
	var spans []string
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		spans = append(spans, m[1])
	}
	return spans
}

// productSource is every non-test Go file of the module, concatenated.
func productSource(t *testing.T) string {
	t.Helper()
	var src strings.Builder
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) && path != "." {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			b, err := os.ReadFile(path)
			src.Write(b)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return src.String()
}

func TestDocsConfigurationTable(t *testing.T) {
	t.Chdir("../..") // the pages and the source are read from the repository's root
	src := productSource(t)
	inTable := map[string]bool{}
	for _, row := range configRows(t) {
		for _, name := range envName.FindAllString(row["variable"], -1) {
			if !strings.Contains(src, `"`+name+`"`) {
				t.Errorf("docs/configuration.md names %s, which no Go source reads", name)
			}
		}
		flags := codeSpans(row["flag"])
		commands := codeSpans(row["commands"])
		if len(flags) > 0 && len(commands) == 0 {
			t.Errorf("docs/configuration.md: %s names no command", row["flag"])
		}
		for _, f := range flags {
			name := strings.TrimLeft(f, "-")
			for _, cmd := range commands {
				if cmd == "serve" {
					inTable[name] = true
				}
				fs, err := flagsOf(strings.Fields(cmd))
				if err != nil {
					t.Errorf("docs/configuration.md: %s: %v", f, err)
				} else if fs.Lookup(name) == nil {
					t.Errorf("docs/configuration.md: switchboard %s has no flag %s", cmd, f)
				}
			}
		}
	}
	// Every flag of serve is configuration, so every one has its row.
	serve, err := flagsOf([]string{"serve"})
	if err != nil {
		t.Fatal(err)
	}
	serve.VisitAll(func(f *flag.Flag) {
		if !inTable[f.Name] {
			t.Errorf("docs/configuration.md has no row for serve's --%s", f.Name)
		}
	})
}

// docUnits splits Markdown prose into what a reader takes in at once: each
// paragraph, list item and table row; code blocks and headings are left out.
func docUnits(doc string) []string {
	var units []string
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			units = append(units, strings.Join(cur, " "))
		}
		cur = nil
	}
	listItem := regexp.MustCompile(`^\s*([-*+]|\d+\.) `)
	inBlock := false
	for _, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(trimmed, "```"):
			flush()
			inBlock = !inBlock
		case inBlock:
		case trimmed == "" || strings.HasPrefix(trimmed, "#"):
			flush()
		case strings.HasPrefix(trimmed, "|"):
			flush()
			units = append(units, trimmed)
		case listItem.MatchString(line):
			flush()
			cur = append(cur, trimmed)
		default:
			cur = append(cur, trimmed)
		}
	}
	flush()
	return units
}

const maxParagraphWords, maxReadmeLines = 120, 200

func TestDocsParagraphsAreShort(t *testing.T) {
	t.Chdir("../..") // the pages and the source are read from the repository's root
	for _, file := range docFiles(t) {
		for _, unit := range docUnits(readDoc(t, file)) {
			if n := len(strings.Fields(unit)); n > maxParagraphWords {
				t.Errorf("%s: a paragraph of %d words (at most %d): %.80s…", file, n, maxParagraphWords, unit)
			}
		}
	}
	if n := strings.Count(readDoc(t, "README.md"), "\n"); n > maxReadmeLines {
		t.Errorf("README.md has %d lines, at most %d: the rest belongs in docs/", n, maxReadmeLines)
	}
}

// TestDocsLinksResolve checks that every relative link in the docs names a
// file that exists, so pages moved or renamed are caught.
func TestDocsLinksResolve(t *testing.T) {
	t.Chdir("../..") // the pages and the source are read from the repository's root
	link := regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	for _, file := range docFiles(t) {
		for _, m := range link.FindAllStringSubmatch(readDoc(t, file), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(file), target)); err != nil {
				t.Errorf("%s links to %s, which does not exist", file, target)
			}
		}
	}
}
