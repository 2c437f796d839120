package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/switchboardhq/switchboard/internal/server"
	"github.com/switchboardhq/switchboard/modules"
	"github.com/switchboardhq/switchboard/store"
)

const modulesSynopsis = `modules list [--url URL] [--modules-dir DIR] [--db FILE] [--json]
       switchboard modules approve NAME TOOL [--hash SHA256] [--db FILE]
       switchboard modules import-openapi SPEC.json --name NAME [--operations ID,ID] [--base-url URL]`

// stateNotRunning is what `modules list` says of a module when no serve answers,
// and stateInvalid of a manifest that does not load.
const (
	stateNotRunning modules.State = "not running"
	stateInvalid    modules.State = "invalid"
)

func runModules(ctx context.Context, env *environ, args []string) error {
	return dispatch(ctx, env, args, modulesSynopsis, subcommand{"list", modulesList}, subcommand{"approve", modulesApprove},
		subcommand{"import-openapi", modulesImportOpenAPI})
}

// modulesList shows what a running serve says about its modules (state, restarts,
// tools, withheld definitions); when none answers at --url, or --modules-dir is
// given without --url, it shows the manifests in --modules-dir and the pins in the
// database instead.
func modulesList(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "modules list", modulesSynopsis)
	db := dbFlag(fs, env)
	url := fs.String("url", defaultURL(env), "URL of the running serve whose /readyz is asked")
	dir := fs.String("modules-dir", envOr(env, "SWITCHBOARD_MODULES_DIR", ""), "manifest directory, read when no serve answers, or instead of asking one when given here without --url (env SWITCHBOARD_MODULES_DIR)")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var views []server.ModuleView
	var err error
	if set["modules-dir"] && !set["url"] {
		// A directory named on the command line is the one to show, say one
		// being prepared, whatever a running serve loaded.
		views, err = offlineModules(ctx, env, *dir, *db)
	} else if views, err = fetchModules(ctx, *url); err != nil {
		fmt.Fprintf(env.stderr, "could not read the modules of the serve at %s (%v); showing manifests and pins\n", *url, err)
		views, err = offlineModules(ctx, env, *dir, *db)
	}
	if err != nil {
		return err
	}
	err = printList(env, *asJSON, views, table[server.ModuleView]{none: "no capability modules are configured", row: moduleRow,
		header: "MODULE\tSTATE\tGRANTED\tRESTARTS\tLAST EXIT\tTOOLS"})
	if err != nil || *asJSON || len(views) == 0 {
		return err
	}
	writeModuleNotes(env.stdout, views)
	// A directory checked before serve loads it fails the check.
	invalid := 0
	for _, v := range views {
		if v.State == stateInvalid {
			invalid++
		}
	}
	if invalid > 0 {
		return fmt.Errorf("%d of the manifests would stop serve (see Last errors above)", invalid)
	}
	return nil
}

// moduleRow is v's row in modules list.
func moduleRow(v server.ModuleView) string {
	exit := "-"
	if v.LastExit != nil {
		exit = v.LastExit.String()
	}
	var tools []string
	for _, t := range v.Tools {
		switch {
		case t.Withheld && t.New:
			tools = append(tools, t.Name+" (new, withheld)")
		case t.Withheld:
			tools = append(tools, t.Name+" (withheld)")
		default:
			tools = append(tools, t.Name)
		}
	}
	return fmt.Sprintf("%s\t%s\t%s\t%d\t%s\t%s", v.Name, v.State, yesNo(v.Granted), v.Restarts, exit, strings.Join(tools, ", "))
}

// writeModuleNotes writes, under the table, why modules are down, which tools
// were refused, and how to approve each withheld one.
func writeModuleNotes(w io.Writer, views []server.ModuleView) {
	// Why a module is not serving: its last error and when it is tried again
	// (a manifest that did not load says what is wrong with it).
	var down []string
	for _, v := range views {
		if v.LastError == "" {
			continue
		}
		line := fmt.Sprintf("  %s: %s", v.Name, printable(v.LastError))
		if !v.NextAttempt.IsZero() {
			line += fmt.Sprintf(" (next start %s)", v.NextAttempt.Local().Format("15:04:05"))
		}
		down = append(down, line)
	}
	if len(down) > 0 {
		fmt.Fprintln(w, "\nLast errors:")
		fmt.Fprintln(w, strings.Join(down, "\n"))
	}
	var refused []string
	for _, v := range views {
		for _, r := range v.RefusedTools {
			refused = append(refused, fmt.Sprintf("  %s: \"%s\": %s", v.Name, printable(r.Upstream), printable(r.Reason)))
		}
		if v.RefusedMore > 0 {
			refused = append(refused, fmt.Sprintf("  %s: and %d more", v.Name, v.RefusedMore))
		}
	}
	if len(refused) > 0 {
		fmt.Fprintln(w, "\nRefused tools: the module advertises them, but they cannot be offered to agents (its other tools are).")
		fmt.Fprintln(w, strings.Join(refused, "\n"))
	}
	writeWithheld(w, views)
}

// writeWithheld shows each withheld tool's change and the command that approves it.
func writeWithheld(w io.Writer, views []server.ModuleView) {
	said := false
	for _, v := range views {
		for _, t := range v.Tools {
			if !t.Withheld {
				continue
			}
			if !said {
				fmt.Fprintln(w, "\nWithheld tools changed their definition since it was approved, or are new. Review each;")
				fmt.Fprintln(w, "to let agents call the tool again as defined, run the command below it.")
				said = true
			}
			fmt.Fprintf(w, "\n  %s, %s\n  switchboard modules approve %s %s --hash %s\n", t.Name, withheldDefinition(t), v.Name, t.Name, t.Hash)
		}
	}
}

// withheldDefinition is what `modules list` shows of a withheld tool: what changed
// since its definition was approved (as `diff -u` would, keys sorted), else the new
// definition whole, else where to see it.
func withheldDefinition(t modules.ToolStatus) string {
	if len(t.Definition) == 0 {
		return "its new definition is shown while serve runs (switchboard modules list --url URL)"
	}
	indent := func(lines []string) string { return "    " + strings.Join(lines, "\n    ") }
	if changes := t.Changes(); changes != nil {
		var out []string
		for _, l := range changes {
			out = append(out, l.String())
		}
		return "what changed since it was approved (- approved, + now):\n" + indent(out)
	}
	def := modules.LaidOut(t.Definition)
	note := "its new definition"
	if t.New {
		note = "a new tool (the module did not list it when its tools were first approved)"
	} else if len(t.PinnedDefinition) == 0 {
		note += " (the approved one was pinned by a Switchboard that kept only its hash)"
	} else {
		note += " (it reads as the approved one once both are laid out alike; only its hash differs)"
	}
	return note + ":\n" + indent(strings.Split(def, "\n"))
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// defaultURL is the serve the CLI asks by default: the one SWITCHBOARD_LISTEN
// names, reached over loopback when it listens on every address.
func defaultURL(env *environ) string {
	addr := envOr(env, "SWITCHBOARD_LISTEN", "127.0.0.1:8080")
	if _, port, err := net.SplitHostPort(addr); err == nil && server.ListensEverywhere(addr) {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	return "http://" + addr
}

// fetchModules reads the modules from a running serve's /readyz, which answers
// 503 while a granted module is down and says so in the same body.
func fetchModules(ctx context.Context, url string) ([]server.ModuleView, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(url, "/")+"/readyz", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Modules []server.ModuleView `json:"modules"`
		Ready   *bool               `json:"ready"`
		Detail  string              `json:"detail"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Ready == nil {
		return nil, fmt.Errorf("%s/readyz is not a Switchboard readiness answer (HTTP %d)", url, resp.StatusCode)
	}
	if body.Detail != "" {
		return nil, fmt.Errorf("%s/readyz: %s (run this on the server, or add this address to its --metrics-allow)", url, body.Detail)
	}
	return body.Modules, nil
}

// offlineModules lists the manifests in dir and the pins in the database, every
// module "not running". The manifest and its executable are checked, not the
// environment: serve's environment (say a systemd EnvironmentFile) is not this
// shell's.
func offlineModules(ctx context.Context, env *environ, dir, db string) ([]server.ModuleView, error) {
	byName := map[string]*server.ModuleView{}
	var order []string
	add := func(name string) *server.ModuleView {
		if v := byName[name]; v != nil {
			return v
		}
		v := &server.ModuleView{ModuleStatus: modules.ModuleStatus{Name: name, State: stateNotRunning, Tools: []modules.ToolStatus{}}}
		byName[name] = v
		order = append(order, name)
		return v
	}
	if dir != "" {
		files, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			return nil, fmt.Errorf("read manifest dir %s: %w", dir, err)
		}
		sort.Strings(files)
		opts := modules.LoadOptions{
			LookupEnv:     func(string) (string, bool) { return "set in serve's environment", true },
			EgressPolicy:  envOr(env, "SWITCHBOARD_EGRESS_POLICY", ""),
			ReservedTools: store.EveryVerb(),
		}
		for _, f := range files {
			m, err := modules.LoadFile(f, opts)
			if err != nil {
				v := add(filepath.Base(f))
				v.State, v.LastError = stateInvalid, err.Error()
				continue
			}
			v := add(m.Name)
			v.Title, v.Description, v.Risk, v.Tags = m.Title, m.Description, m.Risk, m.Tags
		}
	}
	st, err := openStoreRO(ctx, env, db)
	if errors.Is(err, os.ErrNotExist) {
		// No database yet (a machine being set up) still lists the manifests;
		// it says where it looked, since a mistyped --db looks the same.
		what := "no database at %s"
		if store.IsPostgres(db) {
			what = "no Switchboard tables at %s yet"
		}
		fmt.Fprintf(env.stderr, what+": showing the manifests alone, without pins or grants\n", absPath(db))
		return views(order, byName), nil
	}
	if err != nil {
		return nil, err
	}
	defer st.Close()
	pins, err := st.ListToolPins(ctx, "")
	if err != nil {
		return nil, err
	}
	for _, p := range pins {
		v := add(p.Module)
		// A withheld tool's hash is its new definition's, as a serve shows it:
		// the one to review and approve.
		t := modules.ToolStatus{Name: p.Tool, Hash: p.Hash}
		if p.PendingHash != "" {
			t.Hash, t.Withheld, t.New = p.PendingHash, true, p.Hash == ""
			if p.PendingDefinition != nil {
				t.Definition = modules.Reviewable(p.PendingDefinition)
				if p.Definition != nil {
					t.PinnedDefinition = modules.Reviewable(p.Definition)
				}
			}
		}
		v.Tools = append(v.Tools, t)
	}
	granted, err := server.GrantedCapabilities(ctx, st)
	if err != nil {
		return nil, err
	}
	for name, v := range byName {
		v.Granted = granted[name]
	}
	return views(order, byName), nil
}

func views(order []string, byName map[string]*server.ModuleView) []server.ModuleView {
	out := make([]server.ModuleView, 0, len(order))
	for _, name := range order {
		out = append(out, *byName[name])
	}
	return out
}

// modulesApprove pins the pending (withheld) definition of a module tool. A running
// serve notices the commit and makes the tool available again.
func modulesApprove(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "modules approve", modulesSynopsis)
	db := dbFlag(fs, env)
	hash := fs.String("hash", "", "the definition you reviewed: its SHA-256 as modules list prints it (or its first 16+ hex digits); if the module has redefined the tool since, nothing is approved")
	name, tool, err := twoArgs(fs, args)
	if err != nil {
		return err
	}
	// TOOL may be the module's own name for it or the exposed, prefixed one.
	if !strings.HasPrefix(tool, name+"_") {
		tool = name + "_" + tool
	}
	// Approving in a database that does not exist yet would create an empty one
	// and then find nothing to approve.
	st, err := openExisting(ctx, env, *db)
	if err != nil {
		return err
	}
	defer st.Close()
	pin, err := st.ApprovePendingTool(ctx, name, tool, *hash, "human:cli")
	switch {
	case errors.Is(err, store.ErrInvalid):
		return usageErr("--hash must be %d to 64 hex digits of the definition's SHA-256, as modules list prints it", store.MinApprovalHashDigits)
	case errors.Is(err, store.ErrStale):
		return fmt.Errorf("nothing approved: --hash %s is not the definition pending for %s %s. Either it was mistyped, or the module "+
			"redefined the tool after you looked; review the definition pending now (switchboard modules list)", *hash, name, tool)
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("module %s has no pinned tool %s (see switchboard modules list)", name, tool)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("nothing to approve for %s %s: its definition has not changed since it was pinned", name, tool)
	case err != nil:
		return err
	}
	fmt.Fprintf(env.stdout, "approved %s of module %s (sha256 %s); a running serve makes it available within a second\n",
		pin.Tool, pin.Module, pin.Hash)
	return nil
}

// twoArgs reads NAME TOOL given before or after the flags.
func twoArgs(fs *flag.FlagSet, args []string) (string, string, error) {
	var pos []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") && len(pos) < 2 {
		pos, args = append(pos, args[0]), args[1:]
	}
	if err := parse(fs, args); err != nil {
		return "", "", err
	}
	pos = append(pos, fs.Args()...)
	if len(pos) != 2 {
		return "", "", usageErr("want NAME TOOL, got %d arguments", len(pos))
	}
	return pos[0], pos[1], nil
}

// printable escapes, as \uXXXX (\UXXXXXXXX past U+FFFF), every character of s a
// terminal might obey rather than show (C0 and C1 controls, bidi overrides; invalid
// UTF-8 becomes U+FFFD). serve escapes a module's text before it sends it; this
// keeps the refusals modules list prints safe from a server that did not.
func printable(s string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) && utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		switch {
		case unicode.IsPrint(r):
			b.WriteRune(r)
		case r > 0xffff:
			fmt.Fprintf(&b, "\\U%08x", r)
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
	}
	return b.String()
}
