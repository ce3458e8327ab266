package api

// Bounds of one Observations report. Agents stay within them (config
// bounds targets and flows below these); the matrix refuses a report that
// goes beyond a count or a length, truncates what a real cluster can
// outgrow (backends, hops), and clamps numbers, so one peer's report costs
// the matrix a bounded amount of memory and time.
const (
	// MaxReportTargets is the agent's source-port budget: maxTargets x
	// flows is at most 4096.
	MaxReportTargets = 4096
	// MaxFlows is probing.flows' upper bound.
	MaxFlows = 64
	// MaxHops bounds a traced path; a longer one is a loop or garbage.
	MaxHops = 64
	// MaxReportHops bounds the traced hops of one report: every source
	// port's flow traced 64 hops deep.
	MaxReportHops = 4096 * MaxHops
	// MaxNewAddrs bounds the hop addresses one report may bring that the
	// matrix has not seen: an agent's traces cross its ToR, the spines
	// and the other racks' ToRs, some hundreds of addresses at 250 racks.
	MaxNewAddrs = 4096
	// MaxBackends is how many of an lb target's backends count; a
	// larger Service is compared on these.
	MaxBackends = 1024
	// MaxHostAddresses bounds a node agent's host addresses: its
	// interfaces' (a node with many pod veths gives them no address).
	MaxHostAddresses = 64
	// MaxLabels bounds an agent's or target's labels.
	MaxLabels = 64
	// MaxString bounds any name, address, label key or value, class,
	// path or protocol in a report. Kubernetes names are at most 253
	// bytes and qualified label keys 317.
	MaxString = 512
	// MaxCount bounds sent, lost and errors of one window: 2^40 probes
	// is 34 years at 1,000 per second, and sums over every flow of a
	// round stay far below 2^64.
	MaxCount = 1 << 40
	// MaxSeconds bounds an RTT, a window or a trace's age.
	MaxSeconds = 24 * 3600
)
