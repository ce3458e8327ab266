package api

import "time"

// SchemaVersion is bumped on any incompatible change to Observations.
const SchemaVersion = 1

// Observations is one agent's view of its targets over the sliding window.
type Observations struct {
	SchemaVersion int       `json:"schemaVersion"`
	Agent         Agent     `json:"agent"`
	Time          time.Time `json:"time"`
	// WindowSeconds is the length of the sliding window the ratios cover.
	WindowSeconds float64  `json:"windowSeconds"`
	Targets       []Target `json:"targets"`
}

// Agent identifies the reporting agent.
type Agent struct {
	Name    string `json:"name"`
	Class   string `json:"class"` // node | pod
	Address string `json:"address"`
	// Addresses are every address the agent probes from, one per family
	// (dual-stack), Address among them; empty for a single-stack agent.
	Addresses []string          `json:"addresses,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
	Version   string            `json:"version,omitempty"`
	// HostAddresses are, for a node agent (host network), the other
	// addresses of its node's interfaces: an overlay's tunnel endpoint
	// (flannel.1), a CNI bridge's gateway (cni0). A pod's trace hears its
	// node, and another node, from such addresses; known as the node's,
	// they are never taken for fabric devices. At most MaxHostAddresses.
	HostAddresses []string `json:"hostAddresses,omitempty"`
	// FirstHop is the address of the agent's first-hop router: the
	// gateway of its routes to its targets (in a routed leaf-spine, its
	// ToR; for a pod, its node). Empty when unknown. The matrix groups
	// a node without a rack label by it.
	FirstHop string `json:"firstHop,omitempty"`
}

// Target is one probed peer and what every protocol measured towards it.
type Target struct {
	Name    string `json:"name"`
	Address string `json:"address"`
	Class   string `json:"class"` // node | pod | lb
	// Family is the address family probed, ipv4 or ipv6: a dual-stack
	// peer is one entry per family, with the same name. Empty means the
	// family of Address (agents before dual-stack did not send it).
	Family string            `json:"family,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	// Port is the TCP port tcp_syn probes it on: with Address, the
	// source address and a flow's source port, the flow's 5-tuple.
	Port uint16 `json:"port,omitempty"`
	// Path is the path class: node_to_node, node_to_pod, pod_to_node,
	// pod_to_pod, node_to_lb or pod_to_lb.
	Path      string     `json:"path"`
	Protocols []Protocol `json:"protocols"`
	// EstablishedFlowBlackhole is set when PINGs on the long-lived HTTP/2
	// connection die while new flows (tcp_syn) to the same target pass.
	EstablishedFlowBlackhole bool `json:"establishedFlowBlackhole,omitempty"`
	// Backends names the nodes or pods behind an lb target (its Service
	// endpoints), when the agent knows them. The matrix compares the VIP's
	// loss with the backends' direct paths to tell an LB fault from a
	// fabric one; without it, it compares with the sources' other paths.
	Backends []string `json:"backends,omitempty"`
}

// Protocol is one protocol's totals towards a target over the window.
type Protocol struct {
	Protocol string `json:"protocol"` // icmp | tcp_syn | http2_ping
	// NotAnswering is set when the target has not answered the protocol
	// since the agent began probing it, or stopped while it answers
	// others: ICMP echo that a host firewall or a security group drops.
	// No data, never loss: Stats are zero.
	NotAnswering bool `json:"notAnswering,omitempty"`
	Stats
	// Flows is the per-flow breakdown (tcp_syn: one per source port).
	Flows []Flow `json:"flows,omitempty"`
}

// Stats are window counts and RTT quantiles. RTT fields are zero when no
// probe was answered in the window.
type Stats struct {
	Sent       uint64  `json:"sent"`
	Lost       uint64  `json:"lost"`
	LossRatio  float64 `json:"lossRatio"`
	RTTP50     float64 `json:"rttP50Seconds"`
	RTTP99     float64 `json:"rttP99Seconds"`
	Errors     uint64  `json:"errors,omitempty"` // local errors, not loss
	LastResult string  `json:"lastResult,omitempty"`
	// PathMTU is the smallest path MTU a "fragmentation needed" /
	// "packet too big" said in the window (tcp_syn_mtu): discovery
	// works and that is the size that passes. 0: none said.
	PathMTU uint16 `json:"pathMTU,omitempty"`
}

// MinPathMTU is the smaller of two path MTUs, 0 being none said: how
// a window's, a target's and a cell's PathMTU combine.
func MinPathMTU(a, b uint16) uint16 {
	if a == 0 || b != 0 && b < a {
		return b
	}
	return a
}

// Flow is one fixed 5-tuple towards a target.
type Flow struct {
	SourcePort uint16 `json:"sourcePort"`
	Stats
	// Path is the last traced hop list of this flow, when known.
	Path *FlowPath `json:"path,omitempty"`
}

// FlowPath is the traced route of one flow.
type FlowPath struct {
	Hops       []string  `json:"hops"` // hop addresses in TTL order; "" for a silent hop
	Hash       string    `json:"hash"`
	TracedAt   time.Time `json:"tracedAt"`
	AgeSeconds float64   `json:"ageSeconds"`
	// SuspectHop is the index in Hops after which a monotonic loss break
	// starts, or -1 when the flow's trace shows no break.
	SuspectHop int `json:"suspectHop"`
}
