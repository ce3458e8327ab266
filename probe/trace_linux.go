//go:build linux

package probe

import "net/netip"

// openICMPRaw opens the tracer's raw ICMP socket on src. A raw ICMP
// socket is handed a copy of every ICMP message for src (echo replies of
// every ping on the node included, and on IPv6 neighbour discovery too);
// a classic BPF filter keeps only Time Exceeded and Destination
// Unreachable, the two a traceroute reads, so the reader wakes for
// nothing else.
func openICMPRaw(src netip.Addr) (rawSocket, error) {
	var r *linuxRaw
	var err error
	if src.Is4() {
		// openRaw also sets IP_HDRINCL, which changes nothing here: the
		// tracer never sends on this socket.
		r, err = openRaw("ip4:icmp", "trace", src, icmpErrorFilter(false), true)
	} else {
		r, err = openRaw("ip6:ipv6-icmp", "trace", src, icmpErrorFilter(true), false)
	}
	if err != nil {
		return nil, err // not a nil *linuxRaw inside a non-nil interface
	}
	return r, nil
}
