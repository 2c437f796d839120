package main

import "runtime/debug"

// serveGCPercent is the Go collector's target for serve and bench when GOGC is not
// set: the heap may grow to three times what is live between collections, not Go's
// default of twice. Both allocate per request (HTTP, mcp-go's JSON, results) and
// keep little, so collecting half as often leaves more CPU to the work. On a 2-core
// VM (`switchboard bench`, runs interleaved with the default): with both at 200,
// ingest 4,292 deliveries/s against 3,187 and drain 1,018 todos/s against 946 (5
// pairs), most of the ingest gain being the bench's own senders; serve's share alone,
// the bench at 200 in both arms, drain 990 against 946 and ingest unchanged (5
// pairs). It costs serve about 4 MB more RSS under load (68 MB); 400 reached 80 MB.
const serveGCPercent = 200

// tuneGC applies serveGCPercent unless the operator set GOGC, which the runtime
// has then applied already. It returns the percent now in force.
func tuneGC(getenv func(string) string) int {
	if getenv("GOGC") != "" {
		p := debug.SetGCPercent(100)
		debug.SetGCPercent(p)
		return p
	}
	debug.SetGCPercent(serveGCPercent)
	return serveGCPercent
}
