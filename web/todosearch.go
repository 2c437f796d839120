package web

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"unicode"

	"github.com/switchboardhq/switchboard/store"
)

// maxSearch bounds the board's search box, as its input's maxlength does.
const maxSearch = 500

// searchTerm is one word of a search, or one field:value term.
type searchTerm struct {
	field, value string // field is "" for a word
}

// parseSearch reads the board's search box: field:value terms (key:, source:,
// type:, error:, holder:), values in double quotes where they hold spaces, and
// words, which together are text the last error contains. A todo's number alone
// ("42" or "#42") is jump: the board goes to that todo.
func parseSearch(q string) (s store.TodoSearch, jump int64, err error) {
	if len(q) > maxSearch {
		return s, 0, fmt.Errorf("The search is longer than %d characters.", maxSearch)
	}
	terms, err := searchTerms(q)
	if err != nil {
		return s, 0, err
	}
	if len(terms) == 1 && terms[0].field == "" {
		if n, err := strconv.ParseInt(strings.TrimPrefix(terms[0].value, "#"), 10, 64); err == nil && n > 0 {
			return s, n, nil
		}
	}
	var words []string
	fields := map[string]*string{"key": &s.Key, "source": &s.Source, "type": &s.Type, "error": &s.Error, "holder": &s.Holder}
	for _, t := range terms {
		if t.field == "" {
			words = append(words, t.value)
			continue
		}
		dst := fields[t.field]
		switch {
		case t.value == "":
			return s, 0, fmt.Errorf("%s: needs a value, as in %s", t.field, searchExample[t.field])
		case *dst != "":
			return s, 0, fmt.Errorf("%s: is given twice: a todo has one of each.", t.field)
		}
		*dst = t.value
	}
	if len(words) > 0 {
		if s.Error != "" {
			return s, 0, errors.New("Give the error's text once: as error:\"…\" or as words alone, not both.")
		}
		s.Error = strings.Join(words, " ")
	}
	return s, 0, nil
}

var searchExample = map[string]string{"key": "key:d-1 (a delivery's id, or a todo's key such as octo/repo#42)", "source": "source:github, source:webhook:3 or source:human:1",
	"type": "type:push", "error": `error:timeout or error:"connection refused"`, "holder": "holder:agent:bot"}

// searchTerms splits q at spaces outside double quotes. A term is a field's only
// when its field name comes unquoted and is one the search knows: other text
// with a colon ("dial tcp: timeout") is words.
func searchTerms(q string) ([]searchTerm, error) {
	var terms []searchTerm
	var b strings.Builder
	quoted, sawQuote, started, field := false, false, false, ""
	end := func() {
		if started {
			terms = append(terms, searchTerm{field: field, value: b.String()})
		}
		b.Reset()
		quoted, sawQuote, started, field = false, false, false, ""
	}
	for _, r := range q {
		switch {
		case r == '"':
			quoted, sawQuote, started = !quoted, true, true
		case unicode.IsSpace(r) && !quoted:
			end()
		case r == ':' && !sawQuote && field == "" && b.Len() > 0:
			if f := strings.ToLower(b.String()); searchExample[f] != "" {
				field = f
				b.Reset()
				continue
			}
			b.WriteRune(r)
		default:
			b.WriteRune(r)
			started = true
		}
	}
	if quoted {
		return nil, errors.New("A double quote in the search is not closed.")
	}
	end()
	return terms, nil
}

// searchBoard reads the board's search box (?q=) into p. A todo's number alone
// sends the browser to that todo (jumped); a search it cannot read is said in
// words (bad), and the board lists as if none were given, the text kept in the
// box to be mended.
func searchBoard(w http.ResponseWriter, r *http.Request, p *boardPage) (bad string, jumped bool) {
	p.Query = strings.TrimSpace(r.URL.Query().Get("q"))
	s, jump, err := parseSearch(p.Query)
	switch {
	case jump > 0:
		http.Redirect(w, r, "/todos/"+strconv.FormatInt(jump, 10), http.StatusSeeOther)
		return "", true
	case err != nil:
		return err.Error(), false
	}
	p.Search = s
	return "", false
}
