package cli

import (
	"context"
	"flag"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/switchboardhq/switchboard/agent"
	"github.com/switchboardhq/switchboard/store"
)

const endpointSynopsis = `endpoint create --agent NAME (--queues q1,q2 | --capabilities cap1,…) [--verbs v1,v2] [--default-lease SECONDS]
                      [--max-webhooks N] [--webhook-sources github,stripe,…] [--webhook-queues q1,…]
                      [--capabilities cap1,…] [--tool-allow t1,…] [--tool-deny t1,…] [--rate N] [--burst N]
                      [--add-queues q1,…] [--cf-access-identity EMAIL|CLIENT_ID] [--json] [--db FILE]
       switchboard endpoint list [--all] [--json] [--db FILE]
       switchboard endpoint show ID [--json] [--db FILE]
       switchboard endpoint update ID [--queues …] [--verbs …] [--default-lease SECONDS] [--max-webhooks N]
                      [--webhook-sources …] [--webhook-queues …] [--capabilities …] [--tool-allow …]
                      [--tool-deny …] [--rate N] [--burst N] [--add-queues …] [--cf-access-identity …] [--json] [--db FILE]
       switchboard endpoint revoke ID [--db FILE]
       switchboard endpoint grants [ID] [--json] [--db FILE]
       switchboard endpoint revoke-grant GRANT_ID [--db FILE]`

func runEndpoint(ctx context.Context, env *environ, args []string) error {
	return dispatch(ctx, env, args, endpointSynopsis, subcommand{"create", endpointCreate},
		subcommand{"list", endpointList}, subcommand{"update", endpointUpdate}, subcommand{"revoke", endpointRevoke},
		subcommand{"show", endpointShow}, subcommand{"grants", endpointGrants}, subcommand{"revoke-grant", endpointRevokeGrant})
}

// listValue is a comma-separated flag that remembers whether it was given.
type listValue struct {
	set  bool
	list []string
}

func (l *listValue) String() string { return strings.Join(l.list, ",") }
func (l *listValue) Set(v string) error {
	l.set = true
	l.list = nil
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			l.list = append(l.list, p)
		}
	}
	return nil
}

func (l *listValue) ptr() *[]string {
	if !l.set {
		return nil
	}
	out := append([]string{}, l.list...)
	return &out
}

// numValue is a non-negative number flag (a whole number or any number) that
// remembers whether it was given.
type numValue[T int | float64] struct {
	set bool
	v   T
}

type intValue = numValue[int]
type floatValue = numValue[float64]

func (o *numValue[T]) String() string { return fmt.Sprint(o.v) }
func (o *numValue[T]) Set(s string) error {
	var n T
	switch p := any(&n).(type) {
	case *int:
		v, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("not a whole number: %q", s)
		}
		*p = v
	case *float64:
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("not a number: %q", s)
		}
		*p = v
	}
	if n < 0 {
		return fmt.Errorf("must not be negative: %s", s)
	}
	o.set, o.v = true, n
	return nil
}

func (o *numValue[T]) ptr() *T {
	if !o.set {
		return nil
	}
	v := o.v
	return &v
}

// scopeFlags are the endpoint fields a human sets, shared by create and update.
type scopeFlags struct {
	queues, verbs, sources, wqueues, caps listValue
	toolAllow, toolDeny, addQueues        listValue
	lease, maxWebhooks, burst             intValue
	rate                                  floatValue
	cfAccess                              stringValue
}

func (f *scopeFlags) register(fs *flag.FlagSet) {
	fs.Var(&f.queues, "queues", "comma-separated queues the agent may work")
	fs.Var(&f.verbs, "verbs", "comma-separated verbs granted (default: all: "+strings.Join(store.AllVerbs(), ",")+")")
	fs.Var(&f.lease, "default-lease", "default lease in seconds for claims that pass none (0 clears; built-in default 300)")
	fs.Var(&f.maxWebhooks, "max-webhooks", "how many webhooks the agent may create for itself (default 0)")
	fs.Var(&f.sources, "webhook-sources", "source types the agent may create webhooks for ("+strings.Join(store.SourceTypes(), ",")+")")
	fs.Var(&f.wqueues, "webhook-queues", "queues the agent's webhooks may feed (default: its --queues)")
	fs.Var(&f.caps, "capabilities", "capability modules granted (comma-separated names)")
	fs.Var(&f.toolAllow, "tool-allow", "if set, only these module tools (exact prefixed names) of the granted capabilities; empty: all")
	fs.Var(&f.toolDeny, "tool-deny", "module tools (exact prefixed names) refused even if granted")
	fs.Var(&f.rate, "rate", "tool calls per second the agent may make, queue verbs included "+
		"(0: the server's default, 50 a second for module tools and webhook verbs, none for queue verbs)")
	fs.Var(&f.addQueues, "add-queues", "queues the agent may add todos to with add_todo (granted with it on create; "+
		"on update, name add_todo in --verbs)")
	fs.Var(&f.burst, "burst", "tool calls the agent may make at once above --rate (0: the server's default, 100)")
	fs.Var(&f.cfAccess, "cf-access-identity", cfAccessIdentityUsage)
}

func (f *scopeFlags) spec() (store.EndpointSpec, error) {
	// Asked before the database is opened, as a mistake on the command line.
	if err := store.CheckVerbs(f.verbs.list); err != nil {
		return store.EndpointSpec{}, usageErr("%v", err)
	}
	if err := store.CheckSourceTypes(f.sources.list...); err != nil {
		return store.EndpointSpec{}, usageErr("%v", err)
	}
	for _, q := range slices.Concat(f.queues.list, f.wqueues.list, f.addQueues.list) {
		if !store.ValidQueueName(q) {
			return store.EndpointSpec{}, usageErr("%q is not a valid queue name (letters, digits and . _ - : /)", q)
		}
	}
	if f.lease.set && f.lease.v > agent.MaxLeaseSeconds {
		return store.EndpointSpec{}, usageErr("--default-lease must be at most %d seconds", agent.MaxLeaseSeconds)
	}
	return store.EndpointSpec{
		Verbs: f.verbs.ptr(), Queues: f.queues.ptr(), DefaultLeaseTTL: f.lease.ptr(),
		MaxWebhooks: f.maxWebhooks.ptr(), WebhookSources: f.sources.ptr(), WebhookQueues: f.wqueues.ptr(),
		Capabilities: f.caps.ptr(), ToolAllow: f.toolAllow.ptr(), ToolDeny: f.toolDeny.ptr(),
		RatePerSecond: f.rate.ptr(), RateBurst: f.burst.ptr(), AddQueues: f.addQueues.ptr(), CFAccessIdentity: f.cfAccess.ptr(),
	}, nil
}

// noteUnknownGrants warns, on stderr, of granted capabilities and named module
// tools that the running serve does not have: a typo would otherwise grant
// nothing without a word. The grant stands (a module may be added later); with
// no serve answering there is nothing to check against, and nothing is said.
func noteUnknownGrants(ctx context.Context, env *environ, sf scopeFlags) {
	tools := append(append([]string{}, sf.toolAllow.list...), sf.toolDeny.list...)
	if len(sf.caps.list) == 0 && len(tools) == 0 {
		return
	}
	url := defaultURL(env)
	views, err := fetchModules(ctx, url)
	if err != nil {
		return
	}
	modules, offered := map[string]bool{}, map[string]bool{}
	var names []string
	for _, v := range views {
		modules[v.Name] = true
		names = append(names, v.Name)
		for _, t := range v.Tools {
			offered[t.Name] = true
		}
	}
	running := "none"
	if len(names) > 0 {
		running = strings.Join(names, ", ")
	}
	for _, c := range sf.caps.list {
		if !modules[c] {
			fmt.Fprintf(env.stderr, "note: the serve at %s runs no module named %q (it runs: %s); the grant takes effect once one does\n",
				url, printable(c), running)
		}
	}
	for _, t := range tools {
		if !offered[t] {
			fmt.Fprintf(env.stderr, "note: no module of the serve at %s offers a tool named %q (tool names are prefixed: module_tool)\n",
				url, printable(t))
		}
	}
}

func endpointCreate(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "endpoint create", endpointSynopsis)
	db := dbFlag(fs, env)
	agentID := fs.String("agent", "", "agent id: 1-64 of a-z 0-9 _ . - (required)")
	name := fs.String("name", "", "display name (default: the agent id)")
	asJSON := fs.Bool("json", false, "print JSON")
	var sf scopeFlags
	sf.register(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *agentID == "" {
		return usageErr("--agent is required")
	}
	if !store.ValidAgentID(*agentID) {
		return usageErr("--agent %q: use 1-64 of a-z 0-9 _ . -", *agentID)
	}
	// An agent of capability modules alone needs no queue; any other agent does.
	moduleOnly := len(sf.queues.list) == 0 && len(sf.caps.list) > 0
	if len(sf.queues.list) == 0 && !moduleOnly {
		return usageErr("--queues is required (the queues this agent may work), unless it is granted --capabilities alone")
	}
	spec, err := sf.spec()
	if err != nil {
		return err
	}
	if moduleOnly {
		none := []string{}
		spec.Queues = &none
		if spec.Verbs != nil && len(*spec.Verbs) > 0 {
			return usageErr("--verbs %s need queues to work on: give --queues too", strings.Join(*spec.Verbs, ","))
		}
		spec.Verbs = &none
	}
	if spec.Verbs == nil {
		all := store.AllVerbs()
		if spec.AddQueues != nil && len(*spec.AddQueues) > 0 {
			// add_todo is never granted by default; --add-queues asks for it.
			all = append(all, store.OptInVerbs()...)
		}
		spec.Verbs = &all
	}
	if spec.WebhookQueues == nil {
		spec.WebhookQueues = spec.Queues
	}
	spec.AgentName = *name
	s, err := openStore(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	ep, cred, err := s.CreateEndpoint(ctx, *agentID, spec, "human:cli")
	if err != nil {
		return err
	}
	noteUnknownGrants(ctx, env, sf)
	if *asJSON {
		return writeJSON(env, struct {
			Credential string `json:"credential"`
			store.Endpoint
		}{cred, ep})
	}
	fmt.Fprintf(env.stdout, "endpoint %d for agent %s\n", ep.ID, ep.AgentID)
	fmt.Fprintf(env.stdout, "credential: %s\n", cred)
	fmt.Fprintln(env.stdout, "This credential is shown once. Give it to the agent as 'Authorization: Bearer <credential>'.")
	if ep.CFAccessIdentity != "" {
		fmt.Fprintf(env.stdout, "Requests through Cloudflare Access as %s (without a bearer) act as this endpoint too.\n", printable(ep.CFAccessIdentity))
	}
	printClientSetup(env, cred)
	return nil
}

// printClientSetup says how to point Claude Code at the new endpoint with the
// credential kept in the environment: the .mcp.json it prints names the variable,
// not the secret, so it may be committed with the agent's project.
func printClientSetup(env *environ, cred string) {
	mcpURL := strings.TrimSuffix(envOr(env, "SWITCHBOARD_BASE_URL", defaultURL(env)), "/") + "/mcp"
	fmt.Fprintf(env.stdout, "\nFor Claude Code, set the credential where it starts (a shell profile, a secret manager):\n  %s\n",
		agent.ExportLine(cred))
	fmt.Fprintf(env.stdout, "and put this in the project's .mcp.json (it holds no secret):\n%s\n", agent.ClientConfig(mcpURL, agent.FromEnv))
	fmt.Fprintf(env.stdout, "or add it from that shell:\n  %s\n", agent.ClaudeAddCommand(mcpURL, agent.FromEnv))
}

func endpointList(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "endpoint list", endpointSynopsis)
	db := dbFlag(fs, env)
	all := fs.Bool("all", false, "include revoked endpoints")
	asJSON := fs.Bool("json", false, "print JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, err := openStoreRO(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	eps, err := s.ListEndpoints(ctx, *all)
	if err != nil {
		return err
	}
	none := "no live endpoints (--all lists revoked ones too)"
	if *all {
		none = "no endpoints yet: switchboard endpoint create --agent NAME --queues Q makes one"
	}
	return printList(env, *asJSON, eps, table[store.Endpoint]{none: none, row: endpointRow,
		header: "ID\tAGENT\tCREDENTIAL\tQUEUES\tLEASE\tWEBHOOKS IT MAY CREATE\tCAPABILITIES\tSTATUS\tCLOUDFLARE ACCESS"})
}

// endpointRow is e's row in endpoint list.
func endpointRow(e store.Endpoint) string {
	status := "active"
	if e.RevokedAt != nil {
		status = "revoked"
	}
	lease := "300 (built-in)"
	if e.DefaultLeaseTTL > 0 {
		lease = strconv.Itoa(e.DefaultLeaseTTL)
	}
	return fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", e.ID, e.AgentID, e.CredentialHint,
		strings.Join(e.Queues, ","), lease, agent.WebhookGrant(e), strings.Join(e.Capabilities, ","), status, accessColumn(e))
}

func endpointUpdate(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "endpoint update", endpointSynopsis)
	db := dbFlag(fs, env)
	asJSON := fs.Bool("json", false, "print JSON")
	var sf scopeFlags
	sf.register(fs)
	id, rest, err := leadingID(fs, "endpoint", args)
	if err != nil {
		return err
	}
	if err := parseFlags(fs, rest); err != nil {
		return err
	}
	spec, err := sf.spec()
	if err != nil {
		return err
	}
	s, err := openExisting(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	// The endpoint as it would be must still work something: queues, or
	// capability modules alone with no verbs (as create asks).
	old, err := s.Endpoint(ctx, id)
	if err != nil {
		return err
	}
	queues, verbs, caps := old.Queues, old.Verbs, old.Capabilities
	if spec.Queues != nil {
		queues = *spec.Queues
	}
	if spec.Verbs != nil {
		verbs = *spec.Verbs
	}
	if spec.Capabilities != nil {
		caps = *spec.Capabilities
	}
	switch {
	case len(queues) == 0 && len(caps) == 0:
		return usageErr("endpoint %d would work no queues and be granted no modules: give --queues or --capabilities", id)
	case len(queues) == 0 && len(verbs) > 0:
		return usageErr("endpoint %d would have verbs (%s) and no queues to work: give --queues, or --verbs \"\"", id, strings.Join(verbs, ","))
	}
	ep, err := s.UpdateEndpoint(ctx, id, spec, "human:cli")
	if err != nil {
		return err
	}
	noteUnknownGrants(ctx, env, sf)
	if *asJSON {
		return writeJSON(env, ep)
	}
	fmt.Fprintf(env.stdout, "endpoint %d updated\n", ep.ID)
	return nil
}

func endpointRevoke(ctx context.Context, env *environ, args []string) error {
	return onID(ctx, env, args, "endpoint revoke", endpointSynopsis, "endpoint",
		func(ctx context.Context, s *store.Store, id int64) error {
			r, err := s.RevokeEndpointReleasing(ctx, id, "human:cli")
			if err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "endpoint %d revoked\n", id)
			switch {
			case r.Kept && r.Holds > 0:
				fmt.Fprintln(env.stdout, "the todos its agent holds stay claimed: another live endpoint speaks for that agent")
			case r.Released > 0:
				if r.Released == 1 {
					fmt.Fprintln(env.stdout, "the todo its agent held is back on its queue (no other live endpoint speaks for that agent)")
				} else {
					fmt.Fprintf(env.stdout, "%d todos its agent held are back on their queues (no other live endpoint speaks for that agent)\n", r.Released)
				}
			}
			return nil
		})
}
