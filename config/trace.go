package config

import (
	"time"
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

// Trace defaults.
const (
	DefaultTraceInterval        = 5 * time.Minute
	DefaultTraceBudgetPerMinute = 30
	DefaultTraceMaxTTL          = 16
	DefaultTraceProbes          = 3
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
		t.MaxTTL = DefaultTraceMaxTTL
	}
	if t.Probes == 0 {
		t.Probes = DefaultTraceProbes
	}
}

func (c *Agent) validateTrace(bad func(field, format string, args ...any)) {
	t := c.Probing.Trace
	if t.Interval.D() < 10*time.Second {
		bad("probing.trace.interval", "%s is below the 10s minimum", t.Interval.D())
	}
	if t.BudgetPerMinute < 1 || t.BudgetPerMinute > 600 {
		bad("probing.trace.budgetPerMinute", "%d not in 1..600", t.BudgetPerMinute)
	}
	if t.MaxTTL < 1 || t.MaxTTL > 64 {
		bad("probing.trace.maxTTL", "%d not in 1..64", t.MaxTTL)
	}
	if t.Probes < 1 || t.Probes > 20 {
		bad("probing.trace.probes", "%d not in 1..20", t.Probes)
	}
}
