package config

import (
	"time"

	"github.com/netprober/prober/probe"
)

// TraceProbing configures the agent's traceroutes of its tcp_syn flows
// (probing.trace): each flow's path is kept fresh at a low rate, and a
// flow that starts losing is traced at once, all under a per-agent budget
// so that the switches' ICMP engines are not flooded.
type TraceProbing struct {
	// Enabled turns tracing on; it needs tcp_syn. Default true.
	Enabled *bool `json:"enabled,omitempty"`
	// Interval is how often each flow is traced when nothing happens.
	Interval Duration `json:"interval,omitempty"`
	// BudgetPerMinute caps the flow traces this agent starts per minute,
	// for every reason together.
	BudgetPerMinute int `json:"budgetPerMinute,omitempty"`
	// MaxTTL is the last TTL a trace tries.
	MaxTTL int `json:"maxTTL,omitempty"`
	// Probes is the number of probes per hop of one flow's trace.
	Probes int `json:"probes,omitempty"`
}

// Trace defaults and bounds of the agent's own: maxTTL's and probes'
// defaults and the engine's ranges are probe's (probe.TraceConfig).
const (
	DefaultTraceInterval        = 5 * time.Minute
	DefaultTraceBudgetPerMinute = 30
	minTraceInterval            = 10 * time.Second
	maxTraceBudgetPerMinute     = 600
	// maxTraceProbes is tighter than probe.MaxTraceProbes: at the top of
	// the budget, 600 traces a minute x 64 TTLs x 20 probes is already
	// 12,800 probes a second for the switches' ICMP engines.
	maxTraceProbes = 20
)

// On reports whether tracing is enabled.
func (t TraceProbing) On() bool { return t.Enabled == nil || *t.Enabled }

func (c *Agent) setTraceDefaults() {
	t := &c.Probing.Trace
	if t.Enabled == nil {
		on := true
		t.Enabled = &on
	}
	if t.Interval == 0 {
		t.Interval = Duration(DefaultTraceInterval)
	}
	if t.BudgetPerMinute == 0 {
		t.BudgetPerMinute = DefaultTraceBudgetPerMinute
	}
	if t.MaxTTL == 0 {
		t.MaxTTL = probe.DefaultTraceMaxTTL
	}
	if t.Probes == 0 {
		t.Probes = probe.DefaultTraceProbes
	}
}

// TraceConfig is the probe.TraceConfig of the agent's flow traces: one
// flow per trace, answered within probing.timeout.
func (c *Agent) TraceConfig() probe.TraceConfig {
	tc := probe.TraceConfig{
		MaxTTL: c.Probing.Trace.MaxTTL, Probes: c.Probing.Trace.Probes,
		Timeout: c.Probing.Timeout.D(), Concurrency: 1,
	}
	tc.SetDefaults()
	return tc
}

// validateTrace checks probing.trace: the engine's ranges with the
// engine's own Check (what agent.New runs), then the agent's tighter ones.
func (c *Agent) validateTrace(bad func(field, format string, args ...any)) {
	t := c.Probing.Trace
	reported := map[string]bool{}
	c.TraceConfig().Check(func(field, format string, args ...any) {
		switch field {
		case "timeout":
			return // probing.timeout, checked for every protocol
		case "maxTTL", "probes":
			field = "probing.trace." + field
		default:
			field = "probing.trace" // set by the agent, not the file
		}
		reported[field] = true
		bad(field, format, args...)
	})
	if t.Interval.D() < minTraceInterval {
		bad("probing.trace.interval", "%s is below the %s minimum", t.Interval.D(), minTraceInterval)
	}
	if t.BudgetPerMinute < 1 || t.BudgetPerMinute > maxTraceBudgetPerMinute {
		bad("probing.trace.budgetPerMinute", "%d not in 1..%d", t.BudgetPerMinute, maxTraceBudgetPerMinute)
	}
	if t.Probes > maxTraceProbes && !reported["probing.trace.probes"] {
		bad("probing.trace.probes", "%d not in 1..%d", t.Probes, maxTraceProbes)
	}
}
