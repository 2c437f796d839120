package web

import (
	"bytes"
	"embed"
	"fmt"
	"github.com/switchboardhq/switchboard/internal/textcut"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/store"
)

//go:embed templates
var templateFS embed.FS

// pages holds one template set per page: the shared layout and partials plus that
// page's own file, parsed once at start-up.
type pages struct {
	byName map[string]*template.Template
}

func loadPages(funcs template.FuncMap) *pages {
	base := template.Must(template.New("").Funcs(funcs).ParseFS(templateFS, "templates/layout/*.html"))
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		panic("web: list templates: " + err.Error())
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, n := range names {
		t := template.Must(template.Must(base.Clone()).ParseFS(templateFS, n))
		p.byName[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return p
}

// view is what every full page renders: the layout's needs plus the page's own data.
type view struct {
	Title    string
	Nav      string // which header link is current
	Operator *store.Operator
	CSRF     string
	Glance   []queueSummary
	Flash    string
	Error    string
	// Trouble, when set, is why writes are failing (store.WriteTrouble): every
	// page says so, the login page included.
	Trouble string
	// ModulesAttention counts modules down and tools withheld (modulesAttention).
	ModulesAttention int
	// LiveURL, when set, is refreshed by the page script whenever todos change.
	LiveURL string
	Page    any
}

// render writes a full page (the "layout" template) with the header filled in for a
// logged-in operator.
func (u *UI) render(w http.ResponseWriter, r *http.Request, rc *reqCtx, status int, name string, v view) {
	if t := u.store.WriteTrouble(); t != nil {
		v.Trouble = t.String()
	}
	if rc != nil {
		v.Operator, v.CSRF = &rc.Operator, rc.CSRF
		if v.Glance == nil {
			counts, err := u.store.QueueCounts(r.Context())
			if err != nil {
				u.log.Warn("web: count todos for the header", "err", err)
			}
			v.Glance = summarise(counts)
		}
		if v.Flash == "" {
			v.Flash = u.takeFlash(w, r, rc)
		}
		v.ModulesAttention = u.modulesAttention()
	}
	u.execute(w, status, name, "layout", v)
}

// modulesAttention counts what on the Modules page waits for an operator: a
// module that is not up, a tool withheld until its changed definition is
// approved. The header's Modules link shows it, on every page.
func (u *UI) modulesAttention() int {
	if u.opts.Modules == nil {
		return 0
	}
	n := 0
	for _, m := range u.opts.Modules.Status() {
		if m.State != modules.StateUp {
			n++
		}
		for _, t := range m.Tools {
			if t.Withheld {
				n++
			}
		}
	}
	return n
}

// renderFragment writes only one live block of a page, for the page script's refresh.
func (u *UI) renderFragment(w http.ResponseWriter, rc *reqCtx, name, block string, v view) {
	v.Operator, v.CSRF = &rc.Operator, rc.CSRF
	u.execute(w, http.StatusOK, name, block, v)
}

func (u *UI) execute(w http.ResponseWriter, status int, name, block string, v view) {
	t, ok := u.pages.byName[name]
	if !ok {
		panic("web: unknown page " + name)
	}
	// Render into a buffer first so that a template error becomes a clean 500
	// instead of half a page.
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, block, v); err != nil {
		u.log.Error("web: render page", "page", name, "err", err)
		http.Error(w, "internal error while rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	// A page says it is UTF-8: text a database kept as other bytes (SQLite
	// keeps any) goes out as U+FFFD, as PostgreSQL stores it.
	if out := buf.Bytes(); utf8.Valid(out) && bytes.IndexByte(out, 0) < 0 {
		w.Write(out)
	} else {
		io.WriteString(w, textcut.Valid(string(out)))
	}
}

// fail renders an error page with a message written for the human.
func (u *UI) fail(w http.ResponseWriter, r *http.Request, rc *reqCtx, status int, msg string) {
	back, label := backTo(r.URL.Path)
	u.render(w, r, rc, status, "error", view{Title: http.StatusText(status), Error: msg,
		Page: struct {
			Status      int
			Back, Label string
		}{status, back, label}})
}

// backTo is where an error page leads: the list of the section the failed
// request belongs to (a refused approval goes back to Modules), else the board.
func backTo(path string) (href, label string) {
	section, _, _ := strings.Cut(strings.TrimPrefix(path, "/"), "/")
	switch section {
	case "modules":
		return "/modules", "Back to Modules"
	case "endpoints":
		return "/endpoints", "Back to Endpoints"
	case "webhooks", "webhook", "events":
		return "/webhooks", "Back to Webhooks"
	case "audit":
		return "/audit", "Back to the audit log"
	}
	return "/", "Back to the board"
}

// storeError maps a store error to a status and a message for the human, logging the
// unexpected ones.
func (u *UI) storeError(w http.ResponseWriter, r *http.Request, rc *reqCtx, what string, err error) {
	switch {
	case errorsIs(err, store.ErrNotFound):
		u.fail(w, r, rc, http.StatusNotFound, fmt.Sprintf("%s: not found.", what))
	case errorsIs(err, store.ErrConflict):
		u.fail(w, r, rc, http.StatusConflict, fmt.Sprintf("%s: %s.", what, plainError(err)))
	case errorsIs(err, store.ErrInvalid), errorsIs(err, store.ErrAlreadyExists):
		u.fail(w, r, rc, http.StatusBadRequest, fmt.Sprintf("%s: %s.", what, plainError(err)))
	default:
		u.log.Error("web: "+what, "err", err)
		u.fail(w, r, rc, http.StatusInternalServerError, fmt.Sprintf("%s failed; the server log has the details.", what))
	}
}

// plainError strips the "store: …" operation prefixes from a store error so the
// human reads the reason, not the call chain.
func plainError(err error) string {
	msg := err.Error()
	for {
		rest, ok := strings.CutPrefix(msg, "store: ")
		if !ok {
			break
		}
		msg = rest
	}
	// "release todo 7: it is done, not claimed: conflict" → "it is done, not claimed"
	if parts := strings.Split(msg, ": "); len(parts) > 2 {
		msg = strings.Join(parts[1:len(parts)-1], ": ")
	}
	return msg
}
