package lab

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Spec describes the fabric Up builds. Zero values take the defaults of
// SetDefaults; the limits in Validate keep device names unambiguous
// ("n21" is rack 2, node 1) and every address inside the plan of doc.go.
type Spec struct {
	// Prefix starts every namespace name: "<prefix>-spine1". Lowercase
	// letters and digits, at most 12 characters, no "-", so that one
	// lab's prefix is never a prefix of another lab's namespace names.
	Prefix       string `json:"prefix"`
	Spines       int    `json:"spines"`         // 1..8; in three tiers, aggregation switches per fabric pod
	Racks        int    `json:"racks"`          // 1..9, one ToR each
	NodesPerRack int    `json:"nodes_per_rack"` // 1..9
	PodsPerNode  int    `json:"pods_per_node"`  // 1..9, or -1 for none; SetDefaults turns 0 into 1
	// Zones groups consecutive racks into zones z1..zZones (1..Racks).
	// Default: one zone per rack, up to 3 zones.
	Zones int  `json:"zones"`
	LB    bool `json:"lb"`
	// LBPorts restricts the VIP's DNAT to these TCP ports. Empty: every
	// TCP port, to the same port on the backend (with ControlPlane: only
	// APIServerPort).
	LBPorts []uint16 `json:"lb_ports,omitempty"`
	// ControlPlane adds the namespace a Kubernetes control plane runs
	// in, a leaf behind every spine like the LB; the LB's VIP then fronts
	// it instead of the nodes, as a cluster's API server load balancer.
	ControlPlane bool `json:"control_plane,omitempty"`
	// PodCIDRs routes every node's pod CIDR to it even without lab pods
	// (PodsPerNode -1), for the pods a CNI plugin creates on a real node.
	PodCIDRs bool `json:"pod_cidrs,omitempty"`
	// IPv6 numbers every device also from LabRange6 (2001:2::/48), in a
	// plan parallel to the IPv4 one (doc.go): a dual-stack fabric, IPv6
	// ECMP, an IPv6 VIP, faults that drop either family or both.
	IPv6 bool `json:"ipv6,omitempty"`
	// FreshLabels leaves the hosts labelling their IPv6 replies as Linux
	// does by default and a real cluster's pods do: each SYN-ACK from a
	// fresh random hash, so in the lab's label-hashing fabric a flow's
	// replies may cross another spine per probe. Otherwise hosts reflect
	// the label they are sent (RFC 7690) and a flow's replies keep one.
	FreshLabels bool `json:"fresh_labels,omitempty"`
	// Overlay puts the pods on a VXLAN overlay as flannel's vxlan
	// backend does: a flannel.1 device per node (VNI 1, UDP 8472, the
	// node's IPv4 address its tunnel endpoint, static neighbour and FDB
	// entries), every other node's pod CIDR routed over it, the routers
	// knowing no pod address, pods at MTU 1450. Needs pods: the lab's,
	// or a CNI's in the pod CIDRs (PodCIDRs), which then set that MTU.
	Overlay bool `json:"overlay,omitempty"`
	// DropEcho makes every node drop the ICMP echo requests sent to it,
	// as a host firewall or a cloud security group does; TCP passes.
	DropEcho bool `json:"drop_echo,omitempty"`
	// SilentRouters makes the ToRs and spines send no ICMP time exceeded,
	// as a cloud VPC's routers: a trace shows its target and nothing
	// between. (Without it they answer under Linux's default rate limit.)
	SilentRouters bool `json:"silent_routers,omitempty"`
	// SuperSpines, when set (1..8), builds a three-tier Clos: the racks
	// in fabric pods of RacksPerPod (default 2), each pod with Spines
	// aggregation switches ("agg12": pod 1's second) that its ToRs link
	// up to, every aggregation switch linked to every super-spine
	// ("super1"), the LB and the control plane hanging off the
	// super-spines. Each tier routes by ECMP.
	SuperSpines int `json:"super_spines,omitempty"`
	RacksPerPod int `json:"racks_per_pod,omitempty"`
}

// Default sizes, also the CLI's flag defaults.
const (
	DefaultPrefix       = "plab"
	DefaultSpines       = 3
	DefaultRacks        = 3
	DefaultNodesPerRack = 3
	DefaultPodsPerNode  = 1
)

// DefaultSpec is the demo's fabric: 3 spines, 3 racks of 3 nodes with one
// pod each, and an LB.
func DefaultSpec() Spec {
	s := Spec{LB: true}
	s.SetDefaults()
	return s
}

// SetDefaults fills zero fields. LB is a plain bool, so its default (on)
// lives in DefaultSpec and the CLI's flag, not here.
func (s *Spec) SetDefaults() {
	if s.Prefix == "" {
		s.Prefix = DefaultPrefix
	}
	if s.Spines == 0 {
		s.Spines = DefaultSpines
	}
	if s.Racks == 0 {
		s.Racks = DefaultRacks
	}
	if s.NodesPerRack == 0 {
		s.NodesPerRack = DefaultNodesPerRack
	}
	// -1 (no pods) stays -1, so that SetDefaults is idempotent: Up calls
	// it again on a spec its caller already defaulted.
	if s.PodsPerNode == 0 {
		s.PodsPerNode = DefaultPodsPerNode
	}
	if s.Zones == 0 {
		s.Zones = min(s.Racks, 3)
	}
	if s.SuperSpines > 0 && s.RacksPerPod == 0 {
		s.RacksPerPod = min(2, s.Racks)
	}
	if s.ControlPlane && s.LB && len(s.LBPorts) == 0 {
		s.LBPorts = []uint16{APIServerPort}
	}
}

var prefixRE = regexp.MustCompile(`^[a-z][a-z0-9]{0,11}$`)

// Validate reports every field out of range at once.
func (s Spec) Validate() error {
	var errs []error
	if !prefixRE.MatchString(s.Prefix) {
		errs = append(errs, fmt.Errorf("prefix: %q is not 1-12 lowercase letters and digits starting with a letter", s.Prefix))
	}
	check := func(field string, v, lo, hi int) {
		if v < lo || v > hi {
			errs = append(errs, fmt.Errorf("%s: %d not in %d..%d", field, v, lo, hi))
		}
	}
	check("spines", s.Spines, 1, 8)
	check("racks", s.Racks, 1, 9)
	check("nodes_per_rack", s.NodesPerRack, 1, 9)
	if s.PodsPerNode != -1 {
		check("pods_per_node", s.PodsPerNode, 1, 9)
	}
	check("zones", s.Zones, 1, max(s.Racks, 1))
	if s.SuperSpines != 0 {
		check("super_spines", s.SuperSpines, 1, 8)
		check("racks_per_pod", s.RacksPerPod, 1, max(s.Racks, 1))
	} else if s.RacksPerPod != 0 {
		errs = append(errs, errors.New("racks_per_pod: set without super_spines (two tiers have no fabric pods)"))
	}
	for i, p := range s.LBPorts {
		if p == 0 {
			errs = append(errs, fmt.Errorf("lb_ports[%d]: port 0", i))
		}
	}
	if len(s.LBPorts) > 0 && !s.LB {
		errs = append(errs, errors.New("lb_ports: set but lb is off"))
	}
	if s.Overlay && s.PodsPerNode < 1 && !s.PodCIDRs {
		errs = append(errs, errors.New("overlay: needs pods: lab pods (pods_per_node 1..9) or a CNI's (pod_cidrs)"))
	}
	if s.PodCIDRs && s.PodsPerNode > 0 {
		errs = append(errs, errors.New("pod_cidrs: only without lab pods (pods_per_node -1): lab pods route their node's pod CIDR already"))
	}
	return errors.Join(errs...)
}

// ParsePorts parses a comma-separated port list such as "80,443".
func ParsePorts(s string) ([]uint16, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var ports []uint16
	for f := range strings.SplitSeq(s, ",") {
		p, err := strconv.ParseUint(strings.TrimSpace(f), 10, 16)
		if err != nil || p == 0 {
			return nil, fmt.Errorf("port %q: not 1..65535", f)
		}
		ports = append(ports, uint16(p))
	}
	slices.Sort(ports)
	return slices.Compact(ports), nil
}

// Shape says the fabric's size: "3 spines, 3 racks x 3 nodes", or in
// three tiers "2 super-spines over 2 fabric pods of 2 racks with 2
// aggregation switches each, 4 racks x 1 nodes", then the network's
// kinds: ", pods on a VXLAN overlay, silent routers".
// It says the spec as Up builds it, defaults filled: callers print it
// before Up, and an unvalidated spec must not stop them.
func (s Spec) Shape() string {
	s.SetDefaults()
	upper := fmt.Sprintf("%d spines", s.Spines)
	if s.SuperSpines > 0 {
		upper = fmt.Sprintf("%d super-spines over %d fabric pods of %d racks with %d aggregation switches each", s.SuperSpines, s.pods(), s.RacksPerPod, s.Spines)
	}
	shape := fmt.Sprintf("%s, %d racks x %d nodes", upper, s.Racks, s.NodesPerRack)
	// The network's kind, which a person reading a run's log needs as
	// much as its size.
	for _, k := range []struct {
		on   bool
		what string
	}{{s.Overlay, "pods on a VXLAN overlay"}, {s.SilentRouters, "silent routers"}, {s.DropEcho, "nodes dropping echo"}} {
		if k.on {
			shape += ", " + k.what
		}
	}
	return shape
}

// pods is the number of fabric pods in three tiers; 0 while RacksPerPod
// is not valid.
func (s Spec) pods() int {
	if s.RacksPerPod < 1 {
		return 0
	}
	return (s.Racks + s.RacksPerPod - 1) / s.RacksPerPod
}

// podOf returns the fabric pod (1-based) of rack r (1-based) in three
// tiers: consecutive racks share one.
func (s Spec) podOf(r int) int { return (r-1)/s.RacksPerPod + 1 }

// zoneOf returns the zone (1-based) of rack r (1-based): consecutive racks
// share a zone, as racks in one room or building do.
func (s Spec) zoneOf(r int) int {
	return (r-1)*s.Zones/s.Racks + 1
}
