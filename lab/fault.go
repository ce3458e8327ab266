package lab

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/netprober/prober/api"
)

// Fault kinds. Each is an nftables table inet prober_fault in the
// namespace of the device it breaks; docs/lab.md has the rules.
const (
	// FaultDeviceLoss drops Permille of everything Device (a router)
	// forwards, both directions. ICMP the device itself sends (its own
	// Time Exceeded) is not forwarded and still leaves, as a lossy
	// switch's control plane still answers a traceroute.
	FaultDeviceLoss = "device-loss"
	// FaultLinkLoss drops Permille of what From sends to To (two adjacent
	// routers), or of both directions with Both.
	FaultLinkLoss = "link-loss"
	// FaultBlackhole silently drops the TCP flows whose 5-tuple hashes to
	// 0 mod Mod at Device: a fixed 1/Mod of flows, always the same ones.
	FaultBlackhole = "blackhole"
	// FaultLBForget makes the LB drop every packet of connections it
	// tracked before the fault, while new connections work (seed 001).
	FaultLBForget = "lb-forget"
	// FaultLBLoss drops Permille of every packet the LB receives: loss on
	// the LB path only (seed 004).
	FaultLBLoss = "lb-loss"
	// FaultPodNodeLoss drops Permille of the packets pods send to node
	// addresses, at every node's input: pod-to-node paths lose while
	// pod-to-pod (forwarded by the node) and node-to-node do not, the
	// hairpin seed 004 found beside its LB-path loss.
	FaultPodNodeLoss = "pod-node-loss"
	// FaultHostNIC drops Permille of packets in and out of Host's own
	// NIC (eth0, in the host's namespace), a pod's traffic through its
	// node's NIC included.
	FaultHostNIC = "host-nic"
	// FaultPartition cuts Rack or Zone off: its ToRs drop everything
	// from or to other racks and the LB (seed 000).
	FaultPartition = "partition"
	// FaultPortLoss drops Permille of the Proto packets to port Port that
	// Host receives, sends or forwards, only those to Addr when set (a
	// pod behind the node: a server's socket, or a filter on its port,
	// that loses what reaches one service).
	FaultPortLoss = "port-loss"
	// FaultMTUBlackhole drops every packet longer than MTU bytes that From
	// forwards to To (both directions with Both) and tells no sender: a
	// link of a smaller MTU whose router's "fragmentation needed" / "packet
	// too big" never arrives (filtered, or a device that drops oversize
	// frames). Small packets pass; DF-set large ones vanish: a path MTU
	// black hole.
	FaultMTUBlackhole = "mtu-blackhole"
	// FaultMTU lowers the MTU of the link between From and To, both ends,
	// to MTU: routers send "fragmentation needed" / "packet too big" for
	// what does not fit, so path MTU discovery works. A smaller MTU that
	// signals, which no prober should alarm on; Clear restores the
	// lab's 1,500.
	FaultMTU = "mtu"
	// FaultDelay makes Device (a router) hold every packet it forwards
	// for Millis milliseconds before it goes on, both directions: a
	// congested or slow-path switch. This kernel has no netem: the rule
	// queues each packet to userspace (nfnetlink_queue), and a goroutine
	// of the process that injected the fault lets it go when its time
	// is due. The fault lasts as long as that process holds it (see
	// Fault.Holds, Fabric.Hold).
	FaultDelay = "delay"
)

// FaultKinds lists every kind, in the order the CLI documents them.
var FaultKinds = []string{FaultDeviceLoss, FaultLinkLoss, FaultBlackhole, FaultLBForget, FaultLBLoss, FaultPodNodeLoss, FaultHostNIC, FaultPartition, FaultPortLoss, FaultMTUBlackhole, FaultMTU, FaultDelay}

// Fault is one injected failure. Only the fields its Kind uses may be set.
type Fault struct {
	Kind     string `json:"kind"`
	Device   string `json:"device,omitempty"`   // device-loss, blackhole, delay: "spine2", "tor1", "lb"
	From     string `json:"from,omitempty"`     // link-loss: the sending router
	To       string `json:"to,omitempty"`       // link-loss: the receiving router
	Both     bool   `json:"both,omitempty"`     // link-loss: also To -> From
	Host     string `json:"host,omitempty"`     // host-nic, port-loss: "n21", "n21p1"
	Rack     string `json:"rack,omitempty"`     // partition: "r1"
	Zone     string `json:"zone,omitempty"`     // partition: "z1"
	Permille int    `json:"permille,omitempty"` // loss kinds: 1..1000
	Mod      int    `json:"mod,omitempty"`      // blackhole: 2..1024, drops 1/Mod of flows
	Proto    string `json:"proto,omitempty"`    // port-loss: udp or tcp
	Port     int    `json:"port,omitempty"`     // port-loss: the destination port, 1..65535
	Addr     string `json:"addr,omitempty"`     // port-loss: only packets to this address
	MTU      int    `json:"mtu,omitempty"`      // mtu-blackhole, mtu: the largest packet that passes, in bytes
	Millis   int    `json:"millis,omitempty"`   // delay: how long each packet is held, 1..1000 ms
	// Family restricts any kind to one IP family, FamilyIPv4 or
	// FamilyIPv6 ("spine2 drops 10% of IPv6 only": a broken IPv6 ECMP
	// hash or ACL); "" breaks both, IPv6 only on a fabric with it.
	Family string `json:"family,omitempty"`
}

func (ft Fault) String() string {
	var b strings.Builder
	b.WriteString(ft.Kind)
	add := func(k string, v any, set bool) {
		if set {
			fmt.Fprintf(&b, " %s=%v", k, v)
		}
	}
	add("device", ft.Device, ft.Device != "")
	add("from", ft.From, ft.From != "")
	add("to", ft.To, ft.To != "")
	add("both", ft.Both, ft.Both)
	add("host", ft.Host, ft.Host != "")
	add("rack", ft.Rack, ft.Rack != "")
	add("zone", ft.Zone, ft.Zone != "")
	add("permille", ft.Permille, ft.Permille != 0)
	add("mod", ft.Mod, ft.Mod != 0)
	add("proto", ft.Proto, ft.Proto != "")
	add("port", ft.Port, ft.Port != 0)
	add("addr", ft.Addr, ft.Addr != "")
	add("mtu", ft.MTU, ft.MTU != 0)
	add("millis", ft.Millis, ft.Millis != 0)
	add("family", ft.Family, ft.Family != "")
	return b.String()
}

// Holds reports whether ft lives in the process that injects it: a delay
// holds packets in that process's goroutines, so the process must stay
// (Fabric.Hold) for as long as the fault should last. Every other kind
// is rules in the kernel, which outlive the process.
func (ft Fault) Holds() bool { return ft.Kind == FaultDelay }

// Check reports everything wrong with ft for this fabric at once: unknown
// kind or device, parameters out of range or not used by the kind.
func (f *Fabric) Check(ft Fault) error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	uses := map[string]bool{}
	need := func(field string) { uses[field] = true }
	permille := func() {
		need("permille")
		if ft.Permille < 1 || ft.Permille > 1000 {
			bad("permille: %d not in 1..1000", ft.Permille)
		}
	}
	router := func(field, name string, kinds ...string) {
		need(field)
		r, ok := f.Router(name)
		switch {
		case name == "":
			bad("%s: missing (one of %s)", field, strings.Join(f.routerNames(kinds...), ", "))
		case !ok || !slices.Contains(kinds, r.Kind):
			bad("%s: unknown device %q (one of %s)", field, name, strings.Join(f.routerNames(kinds...), ", "))
		}
	}
	switch ft.Kind {
	case FaultDeviceLoss:
		router("device", ft.Device, routerKinds()...)
		permille()
	case FaultLinkLoss, FaultMTUBlackhole, FaultMTU:
		router("from", ft.From, routerKinds()...)
		router("to", ft.To, routerKinds()...)
		need("both")
		if from, ok := f.Router(ft.From); ok && ft.To != "" {
			if _, ok := f.Router(ft.To); ok && !slices.ContainsFunc(from.Interfaces, func(i Interface) bool { return i.Peer == ft.To }) {
				bad("to: %s has no link to %s (links are spine-tor and spine-lb, in three tiers agg-tor, super-agg and super-lb; for a host's link use %s)", ft.From, ft.To, FaultHostNIC)
			}
		}
		if ft.Kind == FaultLinkLoss {
			permille()
			break
		}
		need("mtu")
		switch {
		case ft.Kind == FaultMTUBlackhole && (ft.MTU < 68 || ft.MTU > 9000):
			bad("mtu: %d not in 68..9000 bytes (IPv6 needs 1280 at least)", ft.MTU)
		case ft.Kind == FaultMTU && (ft.MTU < 68 || ft.MTU >= LinkMTU):
			bad("mtu: %d not in 68..%d bytes: below the lab's links' %d", ft.MTU, LinkMTU-1, LinkMTU)
		case ft.Kind == FaultMTU && f.Spec.IPv6 && ft.MTU < 1280:
			// Linux drops an interface's IPv6 addresses below 1280, and
			// restoring the MTU does not bring them back.
			bad("mtu: %d below IPv6's 1280 on a lab with IPv6", ft.MTU)
		}
		if ft.Kind == FaultMTU {
			delete(uses, "both") // always both ends: a link has one MTU
		}
	case FaultBlackhole:
		router("device", ft.Device, routerKinds()...)
		need("mod")
		if ft.Mod < 2 || ft.Mod > 1024 {
			bad("mod: %d not in 2..1024", ft.Mod)
		}
	case FaultDelay:
		router("device", ft.Device, routerKinds()...)
		need("millis")
		if ft.Millis < 1 || ft.Millis > 1000 {
			bad("millis: %d not in 1..1000", ft.Millis)
		}
	case FaultLBForget, FaultLBLoss:
		if !f.Spec.LB {
			bad("kind: %s: this lab has no LB", ft.Kind)
		}
		if ft.Kind == FaultLBLoss {
			permille()
		}
	case FaultPodNodeLoss:
		if f.Spec.PodsPerNode < 1 {
			bad("kind: %s: this lab has no pods", ft.Kind)
		}
		permille()
	case FaultHostNIC:
		need("host")
		if _, ok := f.Host(ft.Host); !ok {
			bad("host: unknown host %q (a node such as n11 or a pod such as n11p1)", ft.Host)
		}
		permille()
	case FaultPortLoss:
		need("host")
		if _, ok := f.Host(ft.Host); !ok {
			bad("host: unknown host %q (a node such as n11 or a pod such as n11p1)", ft.Host)
		}
		need("proto")
		if ft.Proto != "udp" && ft.Proto != "tcp" {
			bad("proto: %q not one of udp, tcp", ft.Proto)
		}
		need("port")
		if ft.Port < 1 || ft.Port > 65535 {
			bad("port: %d not in 1..65535", ft.Port)
		}
		need("addr")
		if a, err := netip.ParseAddr(ft.Addr); ft.Addr != "" && (err != nil || a.Zone() != "") {
			bad("addr: %q is not an IP address", ft.Addr)
		} else if ft.Addr != "" && ft.Family != "" && api.FamilyOf(a) != ft.Family {
			bad("addr: %s is not %s, the fault's family", ft.Addr, ft.Family)
		}
		permille()
	case FaultPartition:
		need("rack")
		need("zone")
		switch {
		case (ft.Rack == "") == (ft.Zone == ""):
			bad("partition: give exactly one of rack and zone")
		case ft.Rack != "" && len(f.torsOf(ft.Rack, "")) == 0:
			bad("rack: unknown rack %q (r1..r%d)", ft.Rack, f.Spec.Racks)
		case ft.Zone != "" && len(f.torsOf("", ft.Zone)) == 0:
			bad("zone: unknown zone %q (z1..z%d)", ft.Zone, f.Spec.Zones)
		}
	case "":
		bad("kind: missing (one of %s)", strings.Join(FaultKinds, ", "))
	default:
		bad("kind: %q not one of %s", ft.Kind, strings.Join(FaultKinds, ", "))
	}
	switch ft.Family {
	case "", FamilyIPv4:
	case FamilyIPv6:
		if !f.Spec.IPv6 {
			bad("family: ipv6: this lab has no IPv6 (lab up --ipv6)")
		}
	default:
		bad("family: %q not one of %s, %s (empty: both)", ft.Family, FamilyIPv4, FamilyIPv6)
	}
	if ft.Kind != "" && slices.Contains(FaultKinds, ft.Kind) {
		set := map[string]bool{
			"device": ft.Device != "", "from": ft.From != "", "to": ft.To != "", "both": ft.Both,
			"host": ft.Host != "", "rack": ft.Rack != "", "zone": ft.Zone != "",
			"permille": ft.Permille != 0, "mod": ft.Mod != 0,
			"proto": ft.Proto != "", "port": ft.Port != 0, "addr": ft.Addr != "", "mtu": ft.MTU != 0,
			"millis": ft.Millis != 0,
		}
		for _, k := range []string{"device", "from", "to", "both", "host", "rack", "zone", "permille", "mod", "proto", "port", "addr", "mtu", "millis"} {
			if set[k] && !uses[k] {
				bad("%s: not used by %s", k, ft.Kind)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("fault %s: %w", ft.Kind, err)
	}
	return nil
}

func (f *Fabric) routerNames(kinds ...string) []string {
	var names []string
	for _, r := range f.Routers {
		if slices.Contains(kinds, r.Kind) {
			names = append(names, r.Name)
		}
	}
	return names
}

// torsOf returns the ToRs of rack, or of every rack in zone.
func (f *Fabric) torsOf(rack, zone string) []int {
	var racks []int
	for r := 1; r <= f.Spec.Racks; r++ {
		if rackName(r) == rack || zoneName(f.Spec.zoneOf(r)) == zone {
			racks = append(racks, r)
		}
	}
	return racks
}
