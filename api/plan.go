package api

// MaxPlanWait bounds how long one long-poll of an agent's plan is held.
const MaxPlanWait = 60

// Authentication between the agents and the matrix (docs/security.md).
const (
	// AgentTokenAudience is the audience of the projected ServiceAccount
	// token an agent presents (Authorization: Bearer) on its long-poll;
	// the API server accepts no token of this audience.
	AgentTokenAudience = "prober"
	// PullKeyHeader carries, on the answers to an agent's authenticated
	// long-poll, the key the matrix presents (Authorization: Bearer)
	// when it pulls that agent's observations.
	PullKeyHeader = "X-Prober-Pull-Key"
)

// Peer is one endpoint of the probe plan: an agent, or a target an agent
// probes. The plan, the matrix and the agents share this one type.
type Peer struct {
	Name    string `json:"name"`
	Class   string `json:"class"` // ClassNode, ClassPod or ClassLB
	Address string `json:"address"`
	// Addresses are a dual-stack peer's addresses, one per family, Address
	// first; empty for a single-stack peer. An agent probes each.
	Addresses []string `json:"addresses,omitempty"`
	// Port is where tcp_syn and http2_ping aim (node and pod peers: the
	// agents' port; lb peers: the Service port).
	Port uint16 `json:"port,omitempty"`
	// Group is the peer's rack (label, else inferred from its first hop),
	// else zone; "" for one group.
	Group string `json:"group,omitempty"`
	// Node is the node a pod peer runs on.
	Node string `json:"node,omitempty"`
	// Pod is the pod of the agent that reports as this peer (a node
	// peer's node agent, a pod peer itself): the matrix checks that the
	// agent's token names it.
	Pod string `json:"pod,omitempty"`
	// PodUID is that pod's UID, which its token must name too: a pod
	// deleted and created again under its name is another pod. Neither
	// is sent to agents.
	PodUID string `json:"podUID,omitempty"`
	// Labels are node, zone and rack when known.
	Labels map[string]string `json:"labels,omitempty"`
	// Backends are, for an lb peer, the node and pod peers behind it.
	Backends []string `json:"backends,omitempty"`
	// HTTP2 is how http2_ping reaches the peer; absent: the class's
	// default (h2c to agents).
	HTTP2 *PeerHTTP2 `json:"http2,omitempty"`
	// DNS, when set, makes the peer a DNS server that dns probes ask on
	// Port (a static target's dns: block has the same form).
	DNS *DNSQuestion `json:"dns,omitempty"`
}

// DNSQuestion is what a DNS probe asks a peer.
type DNSQuestion struct {
	// Query is the name asked (type A); empty: probe.DefaultDNSQuery.
	Query string `json:"query,omitempty"`
	// Only: the peer is asked over DNS alone, no icmp, tcp_syn or
	// http2_ping. The matrix plans the cluster DNS's endpoints so: every
	// agent asks them, and the paths to their nodes are probed already.
	Only bool `json:"only,omitempty"`
}

// PeerHTTP2 is how http2_ping reaches a peer.
type PeerHTTP2 struct {
	Mode       string `json:"mode"` // HTTP2H2C, HTTP2TLS or HTTP2None
	ServerName string `json:"serverName,omitempty"`
	// APIServer is set on the API server's VIPs: the agent verifies them
	// with its API server CA (the matrix cannot know the agent's files).
	APIServer bool `json:"apiServer,omitempty"`
	// InsecureSkipVerify: an opted-in Service's certificate, whose CA
	// and name nobody configured, is not verified.
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
}

// HTTP/2 modes of a peer or a static target: how http2_ping reaches it.
const (
	HTTP2H2C  = "h2c"  // cleartext HTTP/2 with prior knowledge (the agents' default)
	HTTP2TLS  = "tls"  // TLS with ALPN h2, verified (an LB in front of the API server)
	HTTP2None = "none" // not pinged over HTTP/2
)

// ValidHTTP2 reports whether mode is one of the HTTP/2 modes: the one
// check, which config's validation asks of the file and the agent of
// every target it makes, static or planned.
func ValidHTTP2(mode string) bool {
	return mode == HTTP2H2C || mode == HTTP2TLS || mode == HTTP2None
}

// DefaultHTTP2 is a target class's HTTP/2 mode when none is given: nodes
// and pods run agents, which serve h2c; an lb fronts a TLS service such
// as the Kubernetes API server.
func DefaultHTTP2(class string) string {
	if class == ClassLB {
		return HTTP2TLS
	}
	return HTTP2H2C
}

// Probed reports whether targets of class are probed over protocol (a
// config's word: icmp, tcp_syn, http2_ping, dns): every protocol, except
// icmp to lb targets. A kube-proxy VIP does not answer ICMP echo (in
// IPVS mode the probing node answers it itself, measuring nothing) and
// most cloud load balancers do not either: on a healthy cluster every
// icmp probe of the kubernetes Service was lost and the matrix blamed
// it. The agent applies it; an agent's config is checked against it.
func Probed(class, protocol string) bool {
	return class != ClassLB || protocol != ProtocolICMP
}

// PlanRotation says where the plan is in its rotation: it covers every
// pair of groups over RotationRounds rounds of RotationSeconds each;
// Round is the current one.
type PlanRotation struct {
	Round           int     `json:"round"`
	RotationRounds  int     `json:"rotationRounds"`
	RotationSeconds float64 `json:"rotationSeconds"`
}

// AgentPlan is what one agent probes: served to the agent on
// AgentPlanPath, and one entry of PlanView.
type AgentPlan struct {
	// Version changes whenever anything in the plan does.
	Version string `json:"version,omitempty"`
	Name    string `json:"name"`
	Class   string `json:"class"`
	Address string `json:"address,omitempty"`
	Group   string `json:"group"`
	Node    string `json:"node,omitempty"`
	// Labels are the agent's own node, zone and rack as the matrix knows
	// them (the rack possibly inferred): the agent reports them.
	Labels  map[string]string `json:"labels,omitempty"`
	Targets []Peer            `json:"targets"`
}

// PlanView is the answer of PlanPath.
type PlanView struct {
	PlanRotation
	Agents []AgentPlan `json:"agents"`
	// ProbedBy is, with ?node=, for each of that node's agents, the agents
	// that probe it.
	ProbedBy map[string][]string `json:"probedBy,omitempty"`
}
