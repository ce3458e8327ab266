package peers

import (
	"cmp"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/netprober/prober/api"
)

// Classes of peer, as in config.ClassNode and friends.
const (
	ClassNode = api.ClassNode
	ClassPod  = api.ClassPod
	ClassLB   = api.ClassLB
)

// Label keys a Peer carries: api's (LabelReady: see nodePeer).
const (
	LabelNode  = api.LabelNode
	LabelZone  = api.LabelZone
	LabelRack  = api.LabelRack
	LabelReady = api.LabelReady
)

// Well-known Kubernetes names discovery reads.
const (
	// ZoneLabel is the Node label holding its zone.
	ZoneLabel = "topology.kubernetes.io/zone"
	// ProbeAnnotation opts a Service in when its value is "true": its
	// ClusterIPs, and the ingress IPs of a LoadBalancer, become lb
	// peers.
	ProbeAnnotation = "prober.netprober.io/probe"
	// HTTP2Annotation says how an opted-in Service speaks HTTP/2, for
	// http2_ping: "h2c" or "tls". Without it the Service is not pinged:
	// discovery cannot know what an arbitrary Service speaks.
	HTTP2Annotation = "prober.netprober.io/http2"
	// ServiceNameLabel is the EndpointSlice label naming its Service.
	ServiceNameLabel = discoveryv1.LabelServiceName
	// APIServerName is the name the API server's certificate carries for
	// in-cluster clients, the kubernetes Service's DNS name.
	APIServerName = "kubernetes.default.svc"
)

// HTTP/2 modes of a peer, as config.HTTP2H2C and friends.
const (
	HTTP2H2C  = api.HTTP2H2C
	HTTP2TLS  = api.HTTP2TLS
	HTTP2None = api.HTTP2None
)

// HTTP2 is how http2_ping reaches a peer. The zero value (node and pod
// peers) is the agents' default for the class: h2c, as agents serve.
type HTTP2 struct {
	Mode string // "", h2c, tls or none
	// APIServer: a VIP of the API server, verified with the agent's API
	// server CA.
	APIServer  bool
	ServerName string // the name its certificate must carry
	// InsecureSkipVerify: an opted-in Service's certificate, whose CA and
	// name discovery cannot know, is not verified.
	InsecureSkipVerify bool
}

// Peer is one endpoint an agent may probe.
type Peer struct {
	// Name is unique within a snapshot: the node name, the pod name, or
	// namespace/name for a Service's ClusterIP (the kubernetes Service's
	// and opted-in ones), namespace/name@IP for a LoadBalancer ingress IP,
	// and "apiserver-lb" for the configured external API server address.
	Name  string
	Class string // node | pod | lb
	// Addr is the peer's IPv4 address, else its IPv6 one (a single-stack
	// IPv6 cluster); Addr6 the IPv6 address of a dual-stack peer, probed
	// too, invalid otherwise.
	Addr  netip.Addr
	Addr6 netip.Addr
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
	// AgentPod is the agent's pod: a node peer's node agent, a pod
	// peer itself. The matrix checks the agent's token names it.
	AgentPod string
	// AgentPodUID is that pod's UID: a pod deleted and created again
	// under its name is another pod, whose tokens are not the old one's.
	AgentPodUID string
	// Backends are, for an lb peer, the names of the node and pod peers
	// that serve it: its Service's ready endpoints that are peers, sorted.
	// Endpoints that are no peer are left out.
	Backends []string
	// HTTP2 is how http2_ping reaches the peer.
	HTTP2 HTTP2
	// DNS is the name dns probes ask the peer on Port: set on the
	// cluster DNS's VIP and endpoints (dns.go), "" on every other peer.
	// DNSOnly: asked over DNS alone (the endpoints).
	DNS     string
	DNSOnly bool
}

func (p Peer) String() string {
	if p.Addr6.IsValid() {
		return fmt.Sprintf("%s %s %s,%s port %d", p.Class, p.Name, p.Addr, p.Addr6, p.Port)
	}
	return fmt.Sprintf("%s %s %s:%d", p.Class, p.Name, p.Addr, p.Port)
}

// Equal reports whether p and q are the same in every field.
func (p Peer) Equal(q Peer) bool {
	return p.Name == q.Name && p.Class == q.Class && p.Addr == q.Addr && p.Addr6 == q.Addr6 && p.Port == q.Port &&
		p.Unschedulable == q.Unschedulable && p.Agent == q.Agent && p.AgentPod == q.AgentPod && p.AgentPodUID == q.AgentPodUID && maps.Equal(p.Labels, q.Labels) &&
		slices.Equal(p.Backends, q.Backends) && p.HTTP2 == q.HTTP2 && p.DNS == q.DNS && p.DNSOnly == q.DNSOnly
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

// Plan is what the matrix plans from a snapshot: the agents (node peers
// with a Ready node agent, pod peers), the LB targets and the cluster
// DNS's endpoints, as the plan's peers, and each agent's base URL by
// name. A Node without a Ready agent is left out: nobody could tell its
// silence from loss.
func Plan(ps []Peer) (peers []api.Peer, agents map[string]string) {
	keep := make([]Peer, 0, len(ps))
	agents = map[string]string{}
	for _, p := range ps {
		if p.Class == ClassLB || p.DNS != "" && !p.Agent {
			keep = append(keep, p)
			continue
		}
		if !p.Agent {
			continue
		}
		keep = append(keep, p)
		agents[p.Name] = "http://" + netip.AddrPortFrom(p.Addr, p.Port).String()
	}
	return Wire(keep), agents
}

// Wire is ps as the probe plan's peers (api.Peer), in the same order.
func Wire(ps []Peer) []api.Peer {
	out := make([]api.Peer, len(ps))
	for i, p := range ps {
		w := api.Peer{Name: p.Name, Class: p.Class, Address: p.Addr.String(), Port: p.Port,
			Labels: p.Labels, Backends: p.Backends, Pod: p.AgentPod, PodUID: p.AgentPodUID}
		if p.Addr6.IsValid() {
			w.Addresses = []string{w.Address, p.Addr6.String()}
		}
		if p.Class == ClassPod {
			w.Node = p.Labels[LabelNode]
		}
		if p.DNS != "" {
			w.DNS = &api.DNSQuestion{Query: p.DNS, Only: p.DNSOnly}
		}
		if p.HTTP2.Mode != "" {
			w.HTTP2 = &api.PeerHTTP2{Mode: p.HTTP2.Mode, ServerName: p.HTTP2.ServerName,
				APIServer: p.HTTP2.APIServer, InsecureSkipVerify: p.HTTP2.InsecureSkipVerify}
		}
		out[i] = w
	}
	return out
}
