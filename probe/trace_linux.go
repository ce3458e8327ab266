//go:build linux

package probe

import (
	"fmt"
	"net"
	"net/netip"

	"golang.org/x/net/bpf"
)

// openICMPRaw opens the tracer's raw ICMP socket on src. A raw ICMP
// socket is handed a copy of every ICMP message for src (echo replies of
// every ping on the node included); a classic BPF filter keeps only
// Destination Unreachable (3) and Time Exceeded (11), the two a
// traceroute reads, so the reader wakes for nothing else.
func openICMPRaw(src netip.Addr) (rawSocket, error) {
	pc, err := net.ListenPacket("ip4:icmp", src.String())
	if err != nil {
		return nil, privilegeError("trace", err)
	}
	r := &linuxRaw{conn: pc.(*net.IPConn), src: src}
	if r.rc, err = r.conn.SyscallConn(); err != nil {
		pc.Close()
		return nil, err
	}
	prog, err := bpf.Assemble([]bpf.Instruction{
		bpf.LoadMemShift{Off: 0},          // x = IP header length
		bpf.LoadIndirect{Off: 0, Size: 1}, // a = ICMP type
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: icmpTimeExceeded, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: icmpDestUnreachable, SkipTrue: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	})
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("trace bpf: %w", err)
	}
	// setup also sets IP_HDRINCL, which changes nothing here: the tracer
	// never sends on this socket.
	if err := r.setup(prog); err != nil {
		pc.Close()
		return nil, err
	}
	return r, nil
}
