// Command switchboard is a durable todo queue, webhook receiver and MCP gateway for
// AI agents, in one binary on one SQLite file.
//
// This file only hands the command line to internal/cli, which parses it and
// runs the command; internal/server assembles what `switchboard serve` runs.
// The packages do the work.
package main

import (
	"os"

	"github.com/switchboardhq/switchboard/internal/cli"
)

// Stamped by the build (-ldflags "-X main.version=… -X main.commit=…").
var (
	version = "dev"
	commit  = ""
)

func main() {
	os.Exit(cli.Main(version, commit))
}
