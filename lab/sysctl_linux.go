package lab

import "strconv"

// sysctlsFor returns what a namespace of kind needs in a fabric of spec.
// i makes each router's ECMP hash seed distinct but the same on every
// run, so a 5-tuple takes the same spine today and tomorrow.
func sysctlsFor(kind string, i int, spec Spec) []sysctl {
	ipv6 := spec.IPv6
	reflect := ipv6 && !spec.FreshLabels
	s := []sysctl{
		// IPv4 conf is inherited from the host's namespace; a strict
		// rp_filter there would drop ECMP's asymmetric return paths here.
		{key: "net.ipv4.conf.all.rp_filter", value: "0"},
		{key: "net.ipv4.conf.default.rp_filter", value: "0"},
	}
	s = append(s, ipv6Conf(ipv6)...)
	switch kind {
	case KindSpine, KindToR, KindLB, KindAgg, KindSuper:
		s = append(s, forwarding(ipv6)...)
		s = append(s, ecmp(i, ipv6)...)
	case ClassNode:
		s = append(s, forwarding(ipv6)...)
		s = append(s, pingSockets)
		s = append(s, reflectLabels(reflect)...)
	case ClassPod, ClassControlPlane:
		s = append(s, pingSockets)
		s = append(s, reflectLabels(reflect)...)
	}
	return s
}

// reflectLabels makes a host answer with the flow label it was sent
// (SYN-ACK, RST, echo reply; RFC 7690), as anycast ECMP sites set it: the
// routers hash the label, so a reply with a label of its own would take a
// random spine per probe, and a flow's return path would not be a path
// (Spec.FreshLabels makes it so).
func reflectLabels(on bool) []sysctl {
	if !on {
		return nil
	}
	return []sysctl{{key: "net.ipv6.flowlabel_reflect", value: "7"}}
}

// pingSockets allows unprivileged ICMP echo sockets to every group. The
// key says ipv4, but the kernel checks the same range for ICMPv6 echo
// sockets: one setting covers both families.
var pingSockets = sysctl{key: "net.ipv4.ping_group_range", value: "0 2147483647"}

// ipv6Conf turns IPv6 off, or on for addresses the lab assigns only.
func ipv6Conf(on bool) []sysctl {
	if !on {
		// Quiet links: no IPv6 router solicitations or MLD in counters.
		return []sysctl{
			{key: "net.ipv6.conf.all.disable_ipv6", value: "1", optional: true},
			{key: "net.ipv6.conf.default.disable_ipv6", value: "1", optional: true},
		}
	}
	// A new namespace's IPv6 conf is the kernel's defaults, unless the
	// host set net.core.devconf_inherit_init_net: set every value the lab
	// relies on. No router advertisements and no address of the kernel's
	// own choosing but link-local ones, which neighbor discovery needs;
	// without duplicate address detection, those are usable at once, as
	// the lab's own (IFA_F_NODAD) are. No redirects: a ToR sends a pod's
	// packets back out of the bridge they came in on.
	var s []sysctl
	for _, kv := range [][2]string{
		{"disable_ipv6", "0"}, {"accept_ra", "0"}, {"autoconf", "0"}, {"accept_dad", "0"}, {"accept_redirects", "0"},
	} {
		for _, dev := range []string{"all", "default"} {
			s = append(s, sysctl{key: "net.ipv6.conf." + dev + "." + kv[0], value: kv[1]})
		}
	}
	return s
}

func forwarding(ipv6 bool) []sysctl {
	s := []sysctl{
		{key: "net.ipv4.ip_forward", value: "1"},
		// A ToR routes a pod CIDR back out of the bridge it came in on:
		// it must not tell nodes to go direct.
		{key: "net.ipv4.conf.all.send_redirects", value: "0"},
		{key: "net.ipv4.conf.default.send_redirects", value: "0"},
	}
	if ipv6 {
		// all.forwarding also sets default and every existing interface.
		s = append(s, sysctl{key: "net.ipv6.conf.all.forwarding", value: "1"})
	}
	return s
}

// ecmp makes a router hash ECMP as a switch does.
func ecmp(i int, ipv6 bool) []sysctl {
	// Policy 3 hashes the fields below (saddr, daddr, proto, sport,
	// dport), read from the packet. Policy 1 would be the same L4 hash,
	// except that it takes the skb's hash when the sender's socket set
	// one, and that survives the veth into this namespace: a TCP
	// connection's spine would then follow the sending socket's random
	// txhash, differ between two connections with the same 5-tuple, and
	// move to another spine when TCP rehashes after a timeout. A switch
	// sees only headers; so do these routers.
	s := []sysctl{
		{key: "net.ipv4.fib_multipath_hash_policy", value: "3"},
		{key: "net.ipv4.fib_multipath_hash_fields", value: "0x0037"},
		// Answer a traceroute from the interface the probe came in on,
		// as routers do, not from the one the ECMP route back picks:
		// the hop address then names the link the probe took. IPv6 does
		// so for Time Exceeded without being asked (icmp6_send picks
		// its source on the input interface).
		{key: "net.ipv4.icmp_errors_use_inbound_ifaddr", value: "1"},
		// The seed is the IPv6 hash's too.
		{key: "net.ipv4.fib_multipath_hash_seed", value: strconv.Itoa(0x5eed + i), optional: true},
	}
	if ipv6 {
		// The same 5-tuple and the flow label (0x0008), which IPv6
		// switches may hash too (RFC 6438). Linux labels a TCP
		// connection from its random txhash: constant for the
		// connection, new for the next one on the same 5-tuple and after
		// a retransmission timeout (net.core.txrehash), which moves the
		// connection to another spine here as on a fabric that hashes
		// the label. A sender that fixes its label (or turns it off,
		// IPV6_AUTOFLOWLABEL) keeps a 5-tuple on one spine.
		s = append(s,
			sysctl{key: "net.ipv6.fib_multipath_hash_policy", value: "3"},
			sysctl{key: "net.ipv6.fib_multipath_hash_fields", value: "0x003f"},
		)
	}
	return s
}
