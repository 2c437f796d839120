package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboardhq/switchboard/store"
)

// The OAuth grants of endpoints: a hosted agent's consent, given on the board,
// to act as one endpoint (see package oauth).

func endpointGrants(ctx context.Context, env *environ, args []string) error {
	fs := newFlags(env, "endpoint grants", endpointSynopsis)
	db := dbFlag(fs, env)
	asJSON := fs.Bool("json", false, "print JSON")
	var id int64
	if len(args) > 0 && args[0] != "" && args[0][0] != '-' {
		var err error
		if id, args, err = leadingID(fs, "endpoint", args); err != nil {
			return err
		}
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	s, err := openStoreRO(ctx, env, *db)
	if err != nil {
		return err
	}
	defer s.Close()
	grants, err := s.OAuthGrants(ctx, id)
	if err != nil {
		return err
	}
	if len(grants) == 0 && id != 0 {
		// None for an endpoint there is not: say so, not "no grants".
		if _, err := s.Endpoint(ctx, id); err != nil {
			return err
		}
	}
	return printList(env, *asJSON, grants, table[store.OAuthGrant]{
		none:   "no live OAuth grants: a hosted agent gets one when an operator consents on the board",
		header: "GRANT\tENDPOINT\tCLIENT\tREDIRECT HOST\tVERIFIED\tSINCE\tLAST USED",
		row: func(g store.OAuthGrant) string {
			used := "never"
			if g.LastUsedAt != nil {
				used = g.LastUsedAt.Format(time.RFC3339)
			}
			return fmt.Sprintf("%d\t%d\t%s\t%s\t%t\t%s\t%s", g.ID, g.EndpointID, g.ClientName, g.RedirectHost(),
				g.Verified, g.CreatedAt.Format(time.RFC3339), used)
		}})
}

func endpointRevokeGrant(ctx context.Context, env *environ, args []string) error {
	return onID(ctx, env, args, "endpoint revoke-grant", endpointSynopsis, "grant",
		func(ctx context.Context, s *store.Store, id int64) error {
			if err := s.RevokeOAuthGrant(ctx, id, "human:cli"); err != nil {
				return err
			}
			fmt.Fprintf(env.stdout, "grant %d revoked: its tokens stop working at once\n", id)
			return nil
		})
}
