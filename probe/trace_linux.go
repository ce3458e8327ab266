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
	network := "ip4:icmp"
	if !src.Is4() {
		network = "ip6:ipv6-icmp"
	}
	// No HDRINCL: the tracer never sends on this socket.
	r, err := openRaw(network, "trace", src, icmpErrorFilter(!src.Is4()), false)
	if err != nil {
		return nil, err // not a nil *linuxRaw inside a non-nil interface
	}
	return r, nil
}
