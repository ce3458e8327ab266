package api

import (
	"net/netip"
	"strings"
)

// Classes of endpoint: where a probe starts (node, pod) or ends (also lb).
const (
	ClassNode = "node"
	ClassPod  = "pod"
	ClassLB   = "lb"
)

// Label keys a peer and an agent carry; the matrix groups and maps pods
// to nodes by them.
const (
	LabelNode = "node"
	LabelZone = "zone"
	LabelRack = "rack"
	// LabelReady is "unknown" on a node peer whose kubelet has gone
	// silent; absent on Ready nodes.
	LabelReady = "ready"
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

// PathClasses lists every path class, in a stable order.
var PathClasses = []string{PathNodeToNode, PathNodeToPod, PathPodToNode, PathPodToPod, PathNodeToLB, PathPodToLB}

// PathClass is the path class from a source of class from to a target of
// class to, "" when from is no agent class or to no class.
func PathClass(from, to string) string {
	if (from != ClassNode && from != ClassPod) || (to != ClassNode && to != ClassPod && to != ClassLB) {
		return ""
	}
	return from + "_to_" + to
}

// Protocol names, as in configs, metrics and observations. A config's
// dns selects two probes, reported apart: a lookup over UDP and one over
// TCP take different paths through conntrack and kube-proxy.
const (
	ProtocolICMP      = "icmp"
	ProtocolTCPSYN    = "tcp_syn"
	ProtocolHTTP2Ping = "http2_ping"
	ProtocolDNS       = "dns"
	ProtocolDNSUDP    = "dns_udp"
	ProtocolDNSTCP    = "dns_tcp"
	// ProtocolTCPSYNMTU is the tcp_syn probes a flow sends padded to
	// the path's MTU (probing.pmtu): their loss, where the same flows'
	// small probes pass, is a path MTU black hole.
	ProtocolTCPSYNMTU = "tcp_syn_mtu"
)

// Protocols lists every protocol an observation reports, in a stable
// order.
var Protocols = []string{ProtocolICMP, ProtocolTCPSYN, ProtocolHTTP2Ping, ProtocolDNSUDP, ProtocolDNSTCP, ProtocolTCPSYNMTU}

// ConfigProtocols lists what probing.protocols accepts, in a stable
// order: each selects the reported protocols ReportedAs names.
var ConfigProtocols = []string{ProtocolICMP, ProtocolTCPSYN, ProtocolHTTP2Ping, ProtocolDNS}

// ReportedAs is the protocols a config's protocol is reported as: dns is
// dns_udp and dns_tcp, every other itself.
func ReportedAs(configured string) []string {
	if configured == ProtocolDNS {
		return []string{ProtocolDNSUDP, ProtocolDNSTCP}
	}
	return []string{configured}
}

// Address families: the family label of metrics, observations and
// suspects. A dual-stack peer is probed once per family.
const (
	FamilyIPv4 = "ipv4"
	FamilyIPv6 = "ipv6"
)

// Families lists the address families in a stable order.
var Families = []string{FamilyIPv4, FamilyIPv6}

// FamilyOf is addr's family, "" for an invalid address. An IPv4-mapped
// IPv6 address is IPv4: that is where its packets go.
func FamilyOf(addr netip.Addr) string {
	switch {
	case !addr.IsValid():
		return ""
	case addr.Unmap().Is4():
		return FamilyIPv4
	}
	return FamilyIPv6
}

// FamilyName is how a person writes family: IPv4, IPv6.
func FamilyName(family string) string {
	switch family {
	case FamilyIPv4:
		return "IPv4"
	case FamilyIPv6:
		return "IPv6"
	}
	return family
}

// AddressFamily is the family of a textual address: IPv6 when it holds a
// colon, else IPv4. It parses nothing, for the matrix's hot path; the
// report's family field, when set, wins over it (Target.ProbedFamily).
func AddressFamily(addr string) string {
	if strings.IndexByte(addr, ':') >= 0 {
		return FamilyIPv6
	}
	return FamilyIPv4
}

// ProbedFamily is the family t was probed over: its Family, else its
// address's (agents before dual-stack did not send one).
func (t *Target) ProbedFamily() string {
	if t.Family != "" {
		return t.Family
	}
	return AddressFamily(t.Address)
}
