// Package buildinfo is the binary's version, with one owner: stamped at
// build time, read by the agent and the matrix alike, and exported by
// one collector as prober_build_info.
package buildinfo

import (
	"runtime"

	"github.com/prometheus/client_golang/prometheus"
)

// Version and Revision are stamped at build time with
// -ldflags "-X github.com/netprober/prober/buildinfo.Version=...".
var (
	Version  = "dev"
	Revision = "unknown"
)

// GoVersion is the toolchain the binary was built with.
func GoVersion() string { return runtime.Version() }

// UserAgent is what a component ("agent", "matrix") sends as its HTTP
// User-Agent: prober-agent/v1.2.3.
func UserAgent(component string) string { return "prober-" + component + "/" + Version }

// Collector exports prober_build_info: 1, labelled with the version,
// revision and Go version.
func Collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "prober_build_info",
		Help:        "Build information; the value is 1.",
		ConstLabels: prometheus.Labels{"version": Version, "revision": Revision, "goversion": GoVersion()},
	})
	g.Set(1)
	return g
}
