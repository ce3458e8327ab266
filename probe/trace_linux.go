//go:build linux

package probe

import (
	"net/netip"

	"golang.org/x/net/bpf"
)

// openICMPRaw opens the tracer's raw ICMP socket on src. A raw ICMP
// socket is handed a copy of every ICMP message for src (echo replies of
// every ping on the node included); a classic BPF filter keeps only
// Destination Unreachable (3) and Time Exceeded (11), the two a
// traceroute reads, so the reader wakes for nothing else.
func openICMPRaw(src netip.Addr) (rawSocket, error) {
	// openRaw also sets IP_HDRINCL, which changes nothing here: the tracer
	// never sends on this socket.
	r, err := openRaw("ip4:icmp", "trace", src, []bpf.Instruction{
		bpf.LoadMemShift{Off: 0},          // x = IP header length
		bpf.LoadIndirect{Off: 0, Size: 1}, // a = ICMP type
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: icmpTimeExceeded, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: icmpDestUnreachable, SkipTrue: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	})
	if err != nil {
		return nil, err // not a nil *linuxRaw inside a non-nil interface
	}
	return r, nil
}
