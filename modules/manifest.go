// Package modules runs capabilities: MCP servers spoken to over stdio that
// Switchboard starts (modules), MCP servers it reaches over HTTP (remote), and
// HTTP APIs whose operations it calls (rest), supervised alike and re-exposed
// to agents. It loads and validates manifests, owns each module's process
// group, keeps one MCP client session per module or remote server, and
// maintains the catalog of prefixed, pinned tools.
//
// It never decides who may call a tool (that is agent's job), never runs a
// shell, never passes a module anything from Switchboard's environment that
// its manifest did not name, and never connects anywhere but through
// internal/egress.
package modules

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/switchboardhq/switchboard/internal/opfile"
)

// Capability types a manifest's "type" may name.
const (
	TypeModule = "module" // a stdio MCP server Switchboard runs
	TypeREST   = "rest"   // HTTP operations Switchboard calls (rest.go)
	TypeRemote = "remote" // an MCP server Switchboard reaches over HTTP (remote.go)
)

// typeFields are the fields each type allows beside the common ones.
var typeFields = map[string][]string{
	TypeModule: {"command", "arguments", "environment", "enforce_egress_policy", "include_tools"},
	TypeREST:   {"base_url", "auth", "operations", "timeout", "allow_private_network", "max_response_bytes"},
	TypeRemote: {"url", "transport", "headers", "include_tools", "timeout", "allow_private_network"},
}

var commonFields = []string{"version", "type", "name", "title", "description", "tags", "risk"}

// Manifest is one validated capability manifest.
type Manifest struct {
	// File is the manifest's base name, used in every error about it.
	File string `json:"-"`

	Version             int      `json:"version"`
	Type                string   `json:"type"`
	Name                string   `json:"name"`
	Title               string   `json:"title"`
	Description         string   `json:"description"`
	Tags                []string `json:"tags"`
	Risk                string   `json:"risk"`
	Command             string   `json:"command"`
	Arguments           []string `json:"arguments"`
	Environment         []string `json:"environment"`
	EnforceEgressPolicy bool     `json:"enforce_egress_policy"`
	// IncludeTools is nil when the manifest omits it (every advertised tool
	// is selected) and otherwise the exact upstream allowlist.
	IncludeTools []string `json:"include_tools"`

	// A rest capability's API (rest_manifest.go).
	BaseURL    string      `json:"base_url,omitempty"`
	Auth       *RestAuth   `json:"auth,omitempty"`
	Operations []Operation `json:"operations,omitempty"`
	// A remote capability's MCP server (remote.go): its Streamable HTTP URL,
	// and headers whose values come from the environment.
	URL       string            `json:"url,omitempty"`
	Transport string            `json:"transport,omitempty"` // streamable-http (""), or sse: the legacy HTTP+SSE
	Headers   map[string]EnvRef `json:"headers,omitempty"`
	// Timeout bounds one call ("30s" when empty); MaxResponseBytes one answer.
	Timeout          string `json:"timeout,omitempty"`
	MaxResponseBytes int64  `json:"max_response_bytes,omitempty"`
	// AllowPrivateNetwork lets Switchboard's connections reach loopback and
	// private addresses (see internal/egress).
	AllowPrivateNetwork bool `json:"allow_private_network,omitempty"`
}

// LoadOptions carries what manifest validation needs from the gateway.
type LoadOptions struct {
	// LookupEnv reads Switchboard's own environment; nil means os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// EgressPolicy is the serialized global egress policy, "" when none.
	EgressPolicy string
	// ReservedTools are exposed tool names no module may produce (the gateway's
	// own verbs): a module named "list" would expose its tool "todos" as
	// list_todos, shadowed by the verb for some endpoints, unreachable for others.
	ReservedTools []string
	// owners are the uids that may own a module's executable and the
	// directories above it; nil means root and the user Switchboard runs as.
	// Only tests set it, to see a refusal without being root.
	owners []uint32
}

var (
	namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	tagPattern  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,31}$`)
	envPattern  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

const (
	manifestVersion = 1
	reservedEnv     = "SWITCHBOARD_MODULE_"
	serverEnv       = "SWITCHBOARD_"
	maxManifest     = 1 << 20
	maxTitle        = 200
	maxDesc         = 4000
)

// validRisk reports whether r is a catalog risk level a manifest may declare.
func validRisk(r string) bool {
	switch r {
	case "read", "mutating", "destructive":
		return true
	}
	return false
}

// LoadDir reads every *.json file in dir (sorted by name), decodes each
// strictly and validates it. Any invalid manifest, and any module name
// defined twice (or prefixing another), fails the whole load: the gateway must not start on a
// partial or ambiguous configuration.
func LoadDir(dir string, opts LoadOptions) ([]Manifest, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("modules: read manifest dir: %w", err)
	}
	var out []Manifest
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		m, err := LoadFile(filepath.Join(dir, e.Name()), opts)
		if err != nil {
			return nil, err
		}
		for _, prev := range out {
			if err := nameConflict(prev, m); err != nil {
				return nil, err
			}
		}
		out = append(out, m)
	}
	return out, nil
}

// LoadFile reads and validates one manifest.
func LoadFile(path string, opts LoadOptions) (Manifest, error) {
	file := filepath.Base(path)
	data, err := opfile.Read(path, maxManifest)
	if err != nil {
		return Manifest{}, fmt.Errorf("modules: %s: %w", file, err)
	}
	m, err := decodeManifest(file, data)
	if err != nil {
		return Manifest{}, err
	}
	if err := m.Validate(opts); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// wireManifest uses pointers where "missing" must differ from "zero".
type wireManifest struct {
	Version             *int                       `json:"version"`
	Type                *string                    `json:"type"`
	Name                string                     `json:"name"`
	Title               string                     `json:"title"`
	Description         string                     `json:"description"`
	Tags                []string                   `json:"tags"`
	Risk                string                     `json:"risk"`
	Command             string                     `json:"command"`
	Arguments           []string                   `json:"arguments"`
	Environment         []string                   `json:"environment"`
	EnforceEgressPolicy bool                       `json:"enforce_egress_policy"`
	IncludeTools        json.RawMessage            `json:"include_tools"` // null must differ from absent
	URL                 string                     `json:"url"`
	Transport           string                     `json:"transport"`
	Headers             map[string]json.RawMessage `json:"headers"`
	BaseURL             string                     `json:"base_url"`
	Auth                *RestAuth                  `json:"auth"`
	Operations          []Operation                `json:"operations"`
	Timeout             string                     `json:"timeout"`
	MaxResponseBytes    int64                      `json:"max_response_bytes"`
	AllowPrivateNetwork bool                       `json:"allow_private_network"`
}

func decodeManifest(file string, data []byte) (Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var w wireManifest
	if err := dec.Decode(&w); err != nil {
		return Manifest{}, decodeErr(file, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Manifest{}, fmt.Errorf("modules: %s: invalid JSON: data after the manifest object", file)
	}
	if w.Version == nil {
		return Manifest{}, fieldErr(file, "version", "is required")
	}
	if *w.Version != manifestVersion {
		return Manifest{}, fieldErr(file, "version", "unsupported version %d (want %d)", *w.Version, manifestVersion)
	}
	if w.Type == nil {
		return Manifest{}, fieldErr(file, "type", "is required")
	}
	if err := checkTypeFields(file, *w.Type, data); err != nil {
		return Manifest{}, err
	}
	m := Manifest{
		File: file, Version: *w.Version, Type: *w.Type, Name: w.Name, Title: w.Title,
		Description: w.Description, Tags: w.Tags, Risk: w.Risk, Command: w.Command,
		Arguments: w.Arguments, Environment: w.Environment,
		EnforceEgressPolicy: w.EnforceEgressPolicy,
		BaseURL:             w.BaseURL, Auth: w.Auth, Operations: w.Operations, Timeout: w.Timeout,
		MaxResponseBytes: w.MaxResponseBytes, AllowPrivateNetwork: w.AllowPrivateNetwork, URL: w.URL,
		Transport: w.Transport,
	}
	if err := m.decodeHeaders(w.Headers); err != nil {
		return Manifest{}, err
	}
	if w.IncludeTools != nil {
		if err := json.Unmarshal(w.IncludeTools, &m.IncludeTools); err != nil {
			return Manifest{}, fieldErr(file, "include_tools", "must be a list of tool names")
		}
		if m.IncludeTools == nil { // "include_tools": null
			return Manifest{}, fieldErr(file, "include_tools", "must be a non-empty list when present")
		}
	}
	return m, nil
}

// checkTypeFields refuses an unknown type, and a field another type has.
func checkTypeFields(file, typ string, data []byte) error {
	allowed, ok := typeFields[typ]
	if !ok {
		return fieldErr(file, "type", "unknown capability type %q (want \"module\", \"remote\" or \"rest\")", typ)
	}
	var present map[string]json.RawMessage
	if err := json.Unmarshal(data, &present); err != nil {
		return fmt.Errorf("modules: %s: invalid JSON: %w", file, err)
	}
	for _, k := range slices.Sorted(maps.Keys(present)) {
		if !slices.Contains(commonFields, k) && !slices.Contains(allowed, k) {
			return fieldErr(file, k, "is not a field of a %q capability", typ)
		}
	}
	return nil
}

func decodeErr(file string, err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) && typeErr.Field != "" {
		return fieldErr(file, typeErr.Field, "must be %s, not JSON %s", typeErr.Type, typeErr.Value)
	}
	// encoding/json reports unknown fields only as text.
	if rest, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fieldErr(file, strings.Trim(rest, `"`), "unknown field")
	}
	return fmt.Errorf("modules: %s: invalid JSON: %w", file, err)
}

func fieldErr(file, field, format string, args ...any) error {
	return fmt.Errorf("modules: %s: field %q: %s", file, field, fmt.Sprintf(format, args...))
}

// Validate checks the manifest against the contract, including the
// executable on disk and the parent environment, so a module that could not
// be started safely is refused before anything runs. It is called again
// before every (re)start because files and environment can change.
func (m Manifest) Validate(opts LoadOptions) error {
	if !namePattern.MatchString(m.Name) {
		return fieldErr(m.File, "name", "%q must match %s", m.Name, namePattern)
	}
	for _, v := range opts.ReservedTools {
		if strings.HasPrefix(v, m.Name+"_") {
			return fieldErr(m.File, "name", "%q would let the module's tools take the name of the built-in verb %s; "+
				"choose another name", m.Name, v)
		}
	}
	if err := m.validateMetadata(); err != nil {
		return err
	}
	switch m.Type {
	case TypeREST:
		return m.validateREST(opts.LookupEnv)
	case TypeRemote:
		if err := m.validateRemote(opts.LookupEnv); err != nil {
			return err
		}
	default:
		if err := checkExecutable(m.Command, opts.owners); err != nil {
			return fieldErr(m.File, "command", "%v", err)
		}
		if err := m.validateEnvironment(opts.LookupEnv); err != nil {
			return err
		}
		if opts.EgressPolicy != "" && !m.EnforceEgressPolicy {
			return fieldErr(m.File, "enforce_egress_policy", "must be true because a global egress policy is configured")
		}
	}
	if m.IncludeTools != nil {
		if len(m.IncludeTools) == 0 {
			return fieldErr(m.File, "include_tools", "must be a non-empty list when present")
		}
		seen, exposed := map[string]bool{}, map[string]string{}
		for _, t := range m.IncludeTools {
			if t == "" {
				return fieldErr(m.File, "include_tools", "contains an empty tool name")
			}
			if seen[t] {
				return fieldErr(m.File, "include_tools", "lists %q more than once", t)
			}
			seen[t] = true
			// A tool the gateway would refuse cannot be what the manifest selects.
			name := exposedName(m.Name, t)
			if !toolNamePattern.MatchString(name) {
				return fieldErr(m.File, "include_tools", "%q would be exposed as %q, which is not a valid MCP tool name", t, name)
			}
			if other, dup := exposed[name]; dup {
				return fieldErr(m.File, "include_tools", "%q and %q would both be exposed as %q", other, t, name)
			}
			exposed[name] = t
		}
	}
	return nil
}

func (m Manifest) validateMetadata() error {
	if strings.TrimSpace(m.Title) == "" || len(m.Title) > maxTitle {
		return fieldErr(m.File, "title", "must be 1 to %d characters", maxTitle)
	}
	if strings.TrimSpace(m.Description) == "" || len(m.Description) > maxDesc {
		return fieldErr(m.File, "description", "must be 1 to %d characters", maxDesc)
	}
	seen := map[string]bool{}
	for _, t := range m.Tags {
		if !tagPattern.MatchString(t) {
			return fieldErr(m.File, "tags", "tag %q must match %s", t, tagPattern)
		}
		if seen[t] {
			return fieldErr(m.File, "tags", "lists %q more than once", t)
		}
		seen[t] = true
	}
	if !validRisk(m.Risk) {
		return fieldErr(m.File, "risk", "%q must be one of read, mutating, destructive", m.Risk)
	}
	return nil
}

// checkExecutable enforces "clean absolute path to a regular executable":
// no symlink (which could be repointed), no group/world-writable file (which
// someone other than the owner could replace the contents of), and no file or
// directory on the way owned by anyone but root or Switchboard's own user (an
// owner can always chmod and rewrite what they own).
func checkExecutable(path string, owners []uint32) error {
	if path == "" {
		return errors.New("is required")
	}
	if !filepath.IsAbs(path) {
		return errors.New("must be an absolute path")
	}
	if filepath.Clean(path) != path {
		return fmt.Errorf("must be a clean path (%s)", filepath.Clean(path))
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return fmt.Errorf("cannot stat executable: %w", err)
	}
	mode := fi.Mode()
	switch {
	case mode&os.ModeSymlink != 0:
		return errors.New("must not be a symlink")
	case !mode.IsRegular():
		return errors.New("must be a regular file")
	case mode.Perm()&0o111 == 0:
		return errors.New("must be executable")
	case mode.Perm()&0o022 != 0:
		return fmt.Errorf("must not be group- or world-writable (mode %04o)", mode.Perm())
	}
	if err := checkOwner(path, fi, owners); err != nil {
		return err
	}
	// Whoever can write a directory on the way can swap the file (or the
	// directory) for another: every one must be a real directory that only its
	// owner writes, or sticky (as /tmp), where others cannot replace what they
	// do not own.
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		di, err := os.Lstat(dir)
		if err != nil {
			return fmt.Errorf("cannot stat %s: %w", dir, err)
		}
		dm := di.Mode()
		switch {
		case dm&os.ModeSymlink != 0:
			return fmt.Errorf("must not be under a symlinked directory (%s)", dir)
		case !dm.IsDir():
			return fmt.Errorf("%s is not a directory", dir)
		case dm.Perm()&0o022 != 0 && dm&os.ModeSticky == 0:
			return fmt.Errorf("must not be under a group- or world-writable directory (%s, mode %04o)", dir, dm.Perm())
		}
		if err := checkOwner(dir, di, owners); err != nil {
			return err
		}
		if dir == "/" {
			return nil
		}
	}
}

func (m Manifest) validateEnvironment(lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	seen := map[string]bool{}
	for _, name := range m.Environment {
		if name == "LANG" {
			return fieldErr(m.File, "environment", "%q is set by Switchboard and cannot be selected", name)
		}
		if seen[name] {
			return fieldErr(m.File, "environment", "lists %q more than once", name)
		}
		seen[name] = true
		if err := checkEnvName(name, lookup); err != nil {
			return fieldErr(m.File, "environment", "%v", err)
		}
	}
	return nil
}

// checkEnvName checks a variable a manifest names for a credential: a valid
// name, none of Switchboard's own, set and non-empty.
func checkEnvName(name string, lookup func(string) (string, bool)) error {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if !envPattern.MatchString(name) {
		return fmt.Errorf("%q is not a valid variable name", name)
	}
	// Switchboard's own settings include its secret key and credentials;
	// none of them is a capability's business, and SWITCHBOARD_MODULE_* it sets.
	switch {
	case strings.HasPrefix(name, reservedEnv):
		return fmt.Errorf("%q is reserved (%s* names cannot be selected)", name, reservedEnv)
	case strings.HasPrefix(name, serverEnv):
		return fmt.Errorf("%q is Switchboard's own setting (%s* names cannot be passed to modules)", name, serverEnv)
	}
	if v, ok := lookup(name); !ok || v == "" {
		return fmt.Errorf("%q is not set or empty in Switchboard's environment", name)
	}
	return nil
}

// childEnv builds the module's whole environment: nothing is inherited.
func (m Manifest) childEnv(lookup func(string) (string, bool), egressPolicy string) []string {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	env := []string{"LANG=C.UTF-8", "SWITCHBOARD_MODULE_NAME=" + m.Name}
	for _, name := range m.Environment {
		v, _ := lookup(name)
		env = append(env, name+"="+v)
	}
	if egressPolicy != "" {
		env = append(env, "SWITCHBOARD_MODULE_EGRESS_POLICY="+egressPolicy)
	}
	return env
}
