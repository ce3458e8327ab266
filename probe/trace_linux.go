//go:build linux

package probe

import (
	"net/netip"

	"golang.org/x/net/bpf"
)

// openICMPRaw opens the tracer's raw ICMP socket on src. A raw ICMP
// socket is handed a copy of every ICMP message for src (echo replies of
// every ping on the node included, and on IPv6 neighbour discovery too);
// a classic BPF filter keeps only Time Exceeded and Destination
// Unreachable, the two a traceroute reads, so the reader wakes for
// nothing else.
func openICMPRaw(src netip.Addr) (rawSocket, error) {
	return openICMPFiltered(src, "trace", icmpErrorFilter)
}

// openICMPFiltered opens a raw ICMP (ICMPv6) socket on src that hears
// what filter(ipv6) passes; what names it in errors. No HDRINCL: nothing
// is sent on it.
func openICMPFiltered(src netip.Addr, what string, filter func(ipv6 bool) []bpf.Instruction) (rawSocket, error) {
	network := "ip4:icmp"
	if !src.Is4() {
		network = "ip6:ipv6-icmp"
	}
	r, err := openRaw(network, what, src, filter(!src.Is4()), false)
	if err != nil {
		return nil, err // not a nil *linuxRaw inside a non-nil interface
	}
	return r, nil
}
