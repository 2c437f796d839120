package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/switchboardhq/switchboard/internal/opfile"
	"github.com/switchboardhq/switchboard/modules"
)

// maxSpec bounds the OpenAPI document import-openapi reads.
const maxSpec = 16 << 20

// modulesImportOpenAPI writes a rest manifest of an OpenAPI 3 document's
// operations to stdout, for the operator to review and put in the modules
// directory; the operations it leaves out, and why, go to stderr.
func modulesImportOpenAPI(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "modules import-openapi", modulesSynopsis)
	name := fs.String("name", "", "the capability's name: its tools are offered as NAME_<operationId>")
	ops := fs.String("operations", "", "comma-separated operationIds to import (default: every one that can be)")
	base := fs.String("base-url", "", "the API's URL (default: the document's first server, if it is absolute)")
	var pos []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") && len(pos) < 1 {
		pos, args = append(pos, args[0]), args[1:]
	}
	if err := parse(fs, args); err != nil {
		return err
	}
	if pos = append(pos, fs.Args()...); len(pos) != 1 {
		return usageErr("want SPEC.json, got %d arguments", len(pos))
	}
	if *name == "" {
		return usageErr("--name is required")
	}
	spec, err := opfile.Read(pos[0], maxSpec)
	if err != nil {
		return fmt.Errorf("read the OpenAPI document: %w", err)
	}
	opts := modules.ImportOptions{Name: *name, BaseURL: *base}
	if *ops != "" {
		opts.Operations = strings.Split(*ops, ",")
	}
	out, skipped, err := modules.ImportOpenAPI(ctx, spec, opts)
	for _, s := range skipped {
		if s.Operation == "" {
			fmt.Fprintln(env.stderr, s.Reason)
			continue
		}
		fmt.Fprintf(env.stderr, "left out %s: %s\n", s.Operation, s.Reason)
	}
	if err != nil {
		return err // "no operation could be imported": the reasons are above
	}
	fmt.Fprintln(env.stderr, "review the annotations and the auth variable's name before you install it")
	_, err = env.stdout.Write(out)
	return err
}
