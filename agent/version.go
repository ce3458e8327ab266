package agent

import "runtime"

// Version and Revision are stamped at build time with
// -ldflags "-X github.com/netprober/prober/agent.Version=...".
var (
	Version  = "dev"
	Revision = "unknown"
)

// GoVersion is the toolchain the binary was built with.
func GoVersion() string { return runtime.Version() }
