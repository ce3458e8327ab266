package peers

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"
)

// Classes of peer, as in config.ClassNode and friends.
const (
	ClassNode = "node"
	ClassPod  = "pod"
	ClassLB   = "lb"
)

// Label keys a Peer carries; the matrix groups and maps pods to nodes by
// them.
const (
	LabelNode = "node"
	LabelZone = "zone"
	LabelRack = "rack"
	// LabelReady is "unknown" on a node peer whose kubelet has gone
	// silent (see nodePeer); absent on Ready nodes.
	LabelReady = "ready"
)

// Well-known Kubernetes names discovery reads.
const (
	// ZoneLabel is the Node label holding its zone.
	ZoneLabel = "topology.kubernetes.io/zone"
	// ProbeAnnotation opts a Service of type LoadBalancer in: its ingress
	// IPs become lb peers when the value is "true".
	ProbeAnnotation = "prober.netprober.io/probe"
)

// Peer is one endpoint an agent may probe.
type Peer struct {
	// Name is unique within a snapshot: the node name, the pod name, or
	// namespace/name for the kubernetes Service, namespace/name@IP for a
	// LoadBalancer ingress IP, and "apiserver-lb" for the configured
	// external API server address.
	Name  string
	Class string // node | pod | lb
	Addr  netip.Addr
	// Port is where tcp_syn and http2_ping aim: the agents' port for node
	// and pod peers, the Service port for lb peers.
	Port uint16
	// Labels are node, zone and rack when known (node and pod peers).
	Labels map[string]string
	// Unschedulable is a cordoned Node's state (node peers). A cordoned
	// node still carries traffic, so it stays a peer.
	Unschedulable bool
	// Agent is set on a node peer when a Running, Ready prober pod of the
	// node DaemonSet is on it, and on every pod peer: the peers whose
	// observations the matrix can fetch.
	Agent bool
}

func (p Peer) String() string {
	return fmt.Sprintf("%s %s %s:%d", p.Class, p.Name, p.Addr, p.Port)
}

// Equal reports whether p and q are the same in every field.
func (p Peer) Equal(q Peer) bool {
	return p.Name == q.Name && p.Class == q.Class && p.Addr == q.Addr && p.Port == q.Port &&
		p.Unschedulable == q.Unschedulable && p.Agent == q.Agent && maps.Equal(p.Labels, q.Labels)
}

// sortPeers orders peers by class (node, pod, lb) then name, so equal
// cluster states give equal snapshots.
func sortPeers(ps []Peer) {
	rank := map[string]int{ClassNode: 0, ClassPod: 1, ClassLB: 2}
	slices.SortFunc(ps, func(a, b Peer) int {
		return cmp.Or(cmp.Compare(rank[a.Class], rank[b.Class]), cmp.Compare(a.Name, b.Name))
	})
}

func equalSnapshots(a, b []Peer) bool {
	return slices.EqualFunc(a, b, Peer.Equal)
}
