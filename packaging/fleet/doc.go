// Package fleet holds the example load balancer configurations for several
// `switchboard serve` processes on one PostgreSQL (nginx.conf, haproxy.cfg,
// Caddyfile; docs/fleet.md shows them), and the tests that run the fleet behind
// them. It has no code of its own: the tests read the same files the docs show.
package fleet
