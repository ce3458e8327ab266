package api

// Classes of endpoint: where a probe starts (node, pod) or ends (also lb).
const (
	ClassNode = "node"
	ClassPod  = "pod"
	ClassLB   = "lb"
)

// Path classes: the source's class to the target's.
const (
	PathNodeToNode = "node_to_node"
	PathNodeToPod  = "node_to_pod"
	PathPodToNode  = "pod_to_node"
	PathPodToPod   = "pod_to_pod"
	PathNodeToLB   = "node_to_lb"
	PathPodToLB    = "pod_to_lb"
)

// PathClass is the path class from a source of class from to a target of
// class to, "" when from is no agent class or to no class.
func PathClass(from, to string) string {
	if (from != ClassNode && from != ClassPod) || (to != ClassNode && to != ClassPod && to != ClassLB) {
		return ""
	}
	return from + "_to_" + to
}

// Protocol names, as in configs, metrics and observations.
const (
	ProtocolICMP      = "icmp"
	ProtocolTCPSYN    = "tcp_syn"
	ProtocolHTTP2Ping = "http2_ping"
)

// Protocols lists every protocol name in a stable order.
var Protocols = []string{ProtocolICMP, ProtocolTCPSYN, ProtocolHTTP2Ping}
