package server

import (
	"fmt"
	"log/slog"

	"github.com/switchboardhq/switchboard/internal/cfaccess"
)

// cfAccess is the verifier of Cloudflare Access assertions on /mcp, nil when
// neither --cf-access-team-domain nor --cf-access-aud is set. One without the
// other is an error: an assertion cannot be checked against half a setting.
func cfAccess(cfg Config, logger *slog.Logger) (*cfaccess.Verifier, error) {
	if cfg.CFAccessTeamDomain == "" && cfg.CFAccessAUD == "" {
		return nil, nil
	}
	if cfg.CFAccessTeamDomain == "" || cfg.CFAccessAUD == "" {
		return nil, fmt.Errorf("Cloudflare Access needs both --cf-access-team-domain and --cf-access-aud")
	}
	v, err := cfaccess.New(cfg.CFAccessTeamDomain, cfg.CFAccessAUD, cfaccess.Options{Logger: logger})
	if err != nil {
		return nil, err
	}
	host, _ := cfaccess.TeamHost(cfg.CFAccessTeamDomain)
	logger.Info("Cloudflare Access: /mcp accepts verified assertions of endpoints' --cf-access-identity", "team", host)
	return v, nil
}
