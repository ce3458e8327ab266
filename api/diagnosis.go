package api

import "time"

// Diagnosis is what matrix.Localize concludes, served as DiagnosisPath.
type Diagnosis struct {
	Time time.Time `json:"time"`
	// Suspects is sorted by score, highest first; empty, never null,
	// when nothing is significantly lossy.
	Suspects []Suspect `json:"suspects"`
	// Disputed are what the fit or the tier stage would have named but
	// the sources refused: fewer of the agents whose flows cross it lose
	// significantly than see it far cleaner than those say. A lying or
	// broken agent's reports, or paths traced wrong; never a suspect.
	Disputed []Dispute `json:"disputed,omitempty"`
}

// Dispute is a link or a rack's uplinks that a minority of the agents
// crossing it blame.
type Dispute struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Family is the address family whose flows disputed it, when the
	// cluster probes two.
	Family string `json:"family,omitempty"`
	// Confirming agents' flows over it lose significantly; contradicting
	// agents' lose far less than the confirming ones' rate.
	Confirming    int `json:"confirming"`
	Contradicting int `json:"contradicting"`
	// Confirmers and Contradictors name the first few of each, by agent.
	Confirmers    []string `json:"confirmers"`
	Contradictors []string `json:"contradictors"`
}

// The suspect kinds.
const (
	KindDevice    = "device"    // a switch or router: most of its links lose
	KindLink      = "link"      // one direction of one link, "from->to"
	KindLB        = "lb"        // a load balancer / VIP, its backends fine
	KindHost      = "host"      // one node's (or pod's) NIC or agent
	KindTier      = "tier"      // every rack loses: the tier above the ToRs
	KindDataplane = "dataplane" // a node's pod paths lose, its node paths do not
	KindPMTU      = "pmtu"      // a link that drops large packets in silence: a path MTU black hole
	KindLatency   = "latency"   // a device or link that delays what it forwards
)

// Suspect is one thing that drops packets.
type Suspect struct {
	Kind string `json:"kind"`
	// Name is the device name from the matrix's hops map, else the address; a
	// link is "from->to"; a host, dataplane or lb is its node, pod or
	// target name unless Hops names it.
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"`
	// Family is set when the suspect drops one address family only
	// (ipv4 or ipv6): the other family's flows through it are clean.
	// Empty when it drops both, or the cluster probes one family.
	Family string `json:"family,omitempty"`
	// Score (0-1) is the suspect's share of all suspects' excess lost
	// probes, times the confidence of its significance test.
	Score float64 `json:"score"`
	// EstimatedLoss is the loss ratio the suspect itself causes.
	EstimatedLoss float64 `json:"estimatedLoss"`
	// AddedDelay is the delay, in seconds, a latency suspect adds: the
	// median of its slow flows' round trips above the round's fastest.
	AddedDelay float64  `json:"addedDelaySeconds,omitempty"`
	Evidence   Evidence `json:"evidence"`
	// Since is the first round of the current run of rounds in which
	// this suspect (kind and name) appeared.
	Since time.Time `json:"since"`
}

// Evidence is why a suspect is suspected.
type Evidence struct {
	// Stage names what found it: estimator, tier, rule.
	Stage string `json:"stage"`
	// Detail is one line a person reads.
	Detail     string  `json:"detail"`
	LossyFlows int     `json:"lossyFlows"`
	CleanFlows int     `json:"cleanFlows"`
	LostProbes float64 `json:"lostProbes"`
	SentProbes float64 `json:"sentProbes"`
	// PValue bounds the chance of this much loss from an element no
	// worse than the matrix's Thresholds.Healthy.
	PValue float64 `json:"pValue"`
	// Votes is the 007 vote the suspect's links held when blamed.
	Votes float64 `json:"votes,omitempty"`
	// Links lists the suspect's lossy links (devices, hosts).
	Links []string `json:"links,omitempty"`
	// Silent is set on a tier when no router between its flows' ends
	// answered their traces, or one trace in twenty at most (a cloud
	// VPC's fabric, or every router's ICMP filtered): the device cannot
	// be named, only the tier and the flows that lose through it.
	Silent   bool      `json:"silent,omitempty"`
	Examples []FlowRef `json:"examples"`
	// Ties are the suspects the data cannot tell this one from (the same
	// flows cross them: two links of one path between two racks), listed
	// beside it at the same score. Naming either is as right as the data
	// allows.
	Ties []Ref `json:"ties,omitempty"`
}

// Ref names one suspect.
type Ref struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
}

// FlowRef is one example flow.
type FlowRef struct {
	Source string `json:"source"`
	Target string `json:"target"`
	// Path is the pair's path class and Family its address family;
	// Protocol is tcp_syn for a traced flow, empty for a pair's probes
	// over every protocol.
	Path       string `json:"path,omitempty"`
	Family     string `json:"family,omitempty"`
	Protocol   string `json:"protocol,omitempty"`
	SourcePort uint16 `json:"sourcePort,omitempty"`
	// SourceAddress, TargetAddress and TargetPort complete a traced
	// flow's 5-tuple (TCP) where the reports say them: what a switch
	// vendor's ECMP hash tool takes to say which path the flow hashes to.
	SourceAddress string   `json:"sourceAddress,omitempty"`
	TargetAddress string   `json:"targetAddress,omitempty"`
	TargetPort    uint16   `json:"targetPort,omitempty"`
	Sent          uint64   `json:"sent"`
	Lost          uint64   `json:"lost"`
	Hops          []string `json:"hops,omitempty"`
}

// ListScore is the score from which a suspect is listed: what an operator
// reads and acts on, and what list precision is measured over. Below it,
// a suspect is the scatter around a larger one.
const ListScore = 0.1

// Listed returns the suspects scored at least ListScore, highest first.
func (d Diagnosis) Listed() []Suspect {
	var out []Suspect
	for _, s := range d.Suspects {
		if s.Score >= ListScore {
			out = append(out, s)
		}
	}
	return out
}

// TiedWith reports whether s is listed as one the data cannot tell from
// r (Evidence.Ties): naming either is as right as the data allows.
func (s Suspect) TiedWith(r Ref) bool {
	for _, t := range s.Evidence.Ties {
		if t == r {
			return true
		}
	}
	return false
}
