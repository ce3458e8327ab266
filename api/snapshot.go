package api

import "time"

// Snapshot is the loss matrix at one moment, served as MatrixPath.
type Snapshot struct {
	Time    time.Time     `json:"time"`
	GroupBy string        `json:"groupBy"`
	Agents  []AgentStatus `json:"agents"`
	// Groups is the matrix rolled up to GroupBy x GroupBy: at 5,000
	// nodes in 125 racks with groupBy rack, 125 x 125 cells per path and
	// protocol rather than 5,000 x 5,000.
	Groups []Cell `json:"groups"`
	// Worst lists the K (config worst) source-target pairs (nodes or
	// pods, not groups) whose loss is surely highest: ranked by the lower
	// bound of a 95 % Wilson interval, so one lost probe out of one does
	// not top it.
	Worst []Cell `json:"worst"`
	// Cells lists every (source, target, path, protocol) when
	// the matrix's Config.Cells is set.
	Cells []Cell `json:"cells,omitempty"`
}

// AgentStatus says whether an agent's last report still counts.
type AgentStatus struct {
	Name     string    `json:"name"`
	Group    string    `json:"group"`
	State    string    `json:"state"` // fresh | stale
	LastSeen time.Time `json:"lastSeen"`
}

// Cell is the window's loss and RTT from a source to a target over one
// path class and protocol. In Groups, Source and Target are group names;
// RTTP50 is the answered-probe-weighted mean of the pairs' medians and
// RTTP99 the largest pair p99 (an upper bound, not a quantile).
type Cell struct {
	Source    string  `json:"source"`
	Target    string  `json:"target"`
	Path      string  `json:"path"`
	Protocol  string  `json:"protocol"`
	Family    string  `json:"family"` // ipv4 | ipv6
	Sent      uint64  `json:"sent"`
	Lost      uint64  `json:"lost"`
	LossRatio float64 `json:"lossRatio"`
	RTTP50    float64 `json:"rttP50Seconds"`
	RTTP99    float64 `json:"rttP99Seconds"`
	// NotAnswering counts the cell's source-target pairs whose target
	// does not answer the protocol (api.Protocol.NotAnswering): ICMP
	// echo a firewall drops. No data, never loss.
	NotAnswering uint64 `json:"notAnswering,omitempty"`
	// PathMTU is the smallest path MTU the network said to the cell's
	// large probes (tcp_syn_mtu, Stats.PathMTU): discovery works and
	// that size passes. 0: none said.
	PathMTU uint16 `json:"pathMTU,omitempty"`
}

// AgentStates are the values of AgentStatus.State.
const (
	StateFresh = "fresh"
	StateStale = "stale"
)
