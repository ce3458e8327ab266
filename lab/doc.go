// Package lab builds a data-center fabric out of Linux network namespaces
// on one machine, and breaks it on purpose: the ground truth that
// prober's agents and matrix are tested against. It needs root (or
// CAP_NET_ADMIN and CAP_SYS_ADMIN) and nothing else: links, addresses and
// routes go through netlink (github.com/vishvananda/netlink), the load
// balancer and every fault through nftables
// (github.com/google/nftables); no ip or nft binaries.
//
// # Topology
//
// S spines and R racks, each rack a ToR with N nodes, each node with P
// pods, and optionally an LB. Every device is a namespace named
// <prefix>-<device>, pinned under /run/netns as `ip netns add` does:
//
//	plab-spine1 .. plab-spineS   spines
//	plab-tor1 .. plab-torR       ToRs (top-of-rack routers)
//	plab-n21                     rack 2, node 1
//	plab-n21p1                   pod 1 of node n21
//	plab-lb                      the load balancer
//
// Every ToR has a /31 link to every spine. A rack is one L2 segment: a
// Linux bridge br0 in the ToR is the nodes' gateway, each node's eth0 a
// port of it, as hosts sit in a rack VLAN behind a real ToR. Each pod is
// a namespace behind its node over a veth (eth0 in the pod, pN in the
// node), routed like a CNI such as Calico does it: the node routes each
// pod's /32 to its veth and forwards; the pod's gateway is the node's own
// address, on-link; the ToR routes the node's pod CIDR to the node. The
// LB hangs off every spine like a leaf. Spines, ToRs and the LB hash
// ECMP on the 5-tuple read from the packet
// (net.ipv4.fib_multipath_hash_policy=3 with fields 0x37, not policy 1:
// see ecmp in sysctl_linux.go) with a fixed per-device seed, so a ToR
// spreads flows over all spines and the same 5-tuple takes the same spine
// on every connection and every run. Routers answer a traceroute from the
// interface the probe came in on (icmp_errors_use_inbound_ifaddr), so a
// hop address names the link. Nodes and pods allow unprivileged ICMP echo
// sockets (net.ipv4.ping_group_range, which covers ICMPv6 echo too).
//
// # IPv6
//
// Spec.IPv6 makes the fabric dual-stack: every interface that has an IPv4
// address gets an IPv6 one too (below), the routes mirror the IPv4 ones,
// and the LB gets an IPv6 VIP. Without it, IPv6 is disabled in every
// namespace and the fabric is the IPv4 one, byte for byte
// (testdata/plan-*.golden). With it, the routers forward IPv6 and hash
// ECMP with net.ipv6.fib_multipath_hash_policy=3 and fields 0x3f: the
// 5-tuple and the flow label, which IPv6 switches may hash too (RFC
// 6438), with the same per-device seed. Linux labels a TCP connection
// from its random txhash, so a connection stays on one spine, but the
// next one on the same 5-tuple may take another, and so may the same
// connection after a retransmission timeout (net.core.txrehash): a
// sender that fixes its label (labtest.NoAutoFlowLabel turns it off, to
// 0) keeps a 5-tuple on one spine, as an IPv4 sender does. Hosts reflect
// the label they are sent (net.ipv6.flowlabel_reflect), so a flow's
// replies keep one spine too, unless Spec.FreshLabels leaves them
// labelling each SYN-ACK afresh, as real pods do. Routers answer
// a hop limit expiry from the interface the probe came in on, which
// icmp6_send does for any error when the route back has no preferred
// source; ICMPv6 errors keep the kernel's rate limit
// (net.ipv6.icmp.ratelimit), as ICMP's do. Every namespace has
// accept_ra, autoconf, accept_dad and accept_redirects 0: the lab's
// addresses (added with IFA_F_NODAD) and the kernel's link-local ones,
// which neighbor discovery needs, are usable at once, and no address or
// route comes from anywhere else. A pod's IPv6 gateway is its node's
// address, as in IPv4, which the node also holds on the pod's veth:
// neighbor discovery, unlike ARP, answers only for the receiving
// interface's addresses.
//
// # Addresses
//
// Every IPv4 address is from 198.18.0.0/15 (RFC 2544 benchmarking
// space), deterministic:
//
//	198.18.S.0/24          spine S's links
//	198.18.S.2(R-1)/31     spine S <-> ToR R: spine even, ToR odd
//	198.18.S.254/31        spine S <-> LB: spine .254, LB .255
//	198.18.S.252/31        spine S <-> control plane: spine .252, cp .253
//	198.19.R.0/24          rack R's nodes: ToR br0 .1, node N .10+N
//	198.19.100+R.0/24      rack R's pods: node N's pod CIDR .16N/28,
//	                       pod P .16N+P
//	198.19.250.10          the VIP (on the LB's lo)
//	198.19.250.11          the LB's SNAT source (on the LB's lo)
//	198.19.251.10          the control plane (on its lo), with ControlPlane
//
// With Spec.IPv6, the same devices are numbered from 2001:2::/48 (RFC
// 5180 benchmarking space, LabRange6) in the same shape; every count is
// below 10, so each hexadecimal digit reads as one decimal number of the
// IPv4 plan:
//
//	2001:2:0:1S00::/56     spine S's links
//	2001:2:0:1S0R::/127    spine S <-> ToR R: spine ::, ToR ::1 (RFC 6164)
//	2001:2:0:1Sfe::/127    spine S <-> LB: spine ::, LB ::1
//	2001:2:0:1Sfc::/127    spine S <-> control plane: spine ::, cp ::1
//	2001:2:0:R::/64        rack R's nodes: ToR br0 ::1, node N ::1N
//	2001:2:0:10R::/64      rack R's pods: node N's pod CIDR ::N0/124,
//	                       pod P ::NP (PodRange6 is 2001:2:0:100::/56)
//	2001:2:0:250::10       the IPv6 VIP (on the LB's lo); ::11 its SNAT source
//	2001:2:0:251::10       the control plane (on its lo), with ControlPlane
//
// In three tiers (Spec.SuperSpines) there are no spines: aggregation
// switch A of fabric pod P ("aggPA") numbers its links as a spine does
// from 198.18.PA.0/24 (2001:2:0:3PA0::/60: ToR R's 2001:2:0:3PAR::/127),
// and super-spine S ("superS") from 198.18.10S.0/24: aggregation switch
// A of pod P's /31 is .2(PA-1) (2001:2:0:4SPA::/127), the LB's and the
// control plane's as a spine's (2001:2:0:4S00::/56). A ToR routes up by
// ECMP over its pod's aggregation switches, those over the super-spines,
// and a super-spine routes each rack by ECMP over that rack's pod's.
//
// So n21 is 198.19.2.11, n21p1 is 198.19.102.17, and the address a
// traceroute shows for spine 2 seen from rack 1 is 198.18.2.0; in IPv6
// they are 2001:2:0:2::11, 2001:2:0:102::11 and 2001:2:0:1201::. Spines
// route each rack's two /24s to that rack's ToR and 198.19.250.0/24 to
// the LB; ToRs and the LB reach other racks (and the LB) by an ECMP route
// over all spines; the IPv6 routes do the same with the /64s. Hosts route
// only 198.18.0.0/15 (and 2001:2::/48), no default route, so a bug that
// dials any other address fails at once.
//
// # Load balancer
//
// The LB namespace DNATs TCP to the VIP (every port, or Spec.LBPorts) to
// a random node, same port (`dnat to numgen random mod N map {...}`), and
// SNATs it to 198.19.250.11 so replies come back through it (one-arm LB).
// With IPv6, table ip6 prober_lb does the same for the IPv6 VIP, to the
// nodes' (or the control plane's) IPv6 addresses, SNAT to 2001:2:0:250::11.
//
// # A real cluster's fabric
//
// Spec.ControlPlane adds <prefix>-cp, a leaf behind every spine like the
// LB, where a Kubernetes control plane runs; the VIP then forwards only
// APIServerPort (6443), to it: the API server's load balancer, which
// kubelets reach through the fabric. Spec.PodCIDRs routes each node's pod
// CIDR (Host.PodCIDR, inside PodRange; Host.PodCIDR6 inside PodRange6 with
// IPv6) to it without lab pods, for the
// pods a CNI plugin creates there. Package testbed builds a cluster on it.
//
// # Networks of other kinds
//
// Spec.Overlay puts the pods on a VXLAN overlay as flannel's vxlan
// backend does (flannel.1, VNI 1, UDP 8472, static FDB and neighbour
// entries, each remote pod CIDR routed via its node's tunnel address,
// Host.Tunnel): the routers then route the nodes' segments only, a node
// masquerades its pods to the LB and control plane, pods run at MTU 1450.
// With Spec.PodCIDRs instead of lab pods the overlay carries the pod
// CIDRs a CNI fills, whose pods must then take OverlayMTU.
// Spec.SilentRouters makes ToRs and spines send no time exceeded (a cloud
// VPC's); Spec.DropEcho makes nodes drop echo (a security group).
// Fabric.Silence silences one router. Their rules are the network, in an
// inet prober_filter table, which Clear keeps.
//
// # Faults
//
// A Fault is one nftables table, inet prober_fault, in the namespace of
// the device it breaks; Clear deletes that table everywhere. See Fault.
// On a dual-stack fabric every kind drops both families, unless
// Fault.Family names one; neighbor discovery always passes, as ARP does.
//
// A delay (FaultDelay) is more than its table: the kernel has no netem,
// so its rule queues packets to an nfnetlink_queue socket of the
// process that injected it, whose goroutines let each go when due.
// Clear and Down stop them; they also end by themselves when their
// chain is gone (Clear in another process); Fabric.Hold waits for them.
//
// # Inventory
//
// Up writes the Fabric as JSON to /run/prober-lab/<prefix>.json; Load
// reads it back in another process. Down removes every namespace with
// the prefix, listed or not, and the JSON.
package lab
