package probe

import "golang.org/x/net/bpf"

// Classic BPF filters for the raw sockets, so a reader wakes only for
// what it reads. A filter runs where the socket's data starts: at the IP
// header on an IPv4 raw socket, at the transport header on an IPv6 one,
// which delivers no IP header.

// tcpPortFilter passes TCP segments to a destination port in
// [base, base+n): the tcp_syn engine's reserved range.
func tcpPortFilter(ipv6 bool, base, n uint16) []bpf.Instruction {
	load := []bpf.Instruction{
		bpf.LoadMemShift{Off: 0},          // x = IP header length
		bpf.LoadIndirect{Off: 2, Size: 2}, // a = TCP destination port
	}
	if ipv6 {
		load = []bpf.Instruction{bpf.LoadAbsolute{Off: 2, Size: 2}}
	}
	return append(load,
		bpf.JumpIf{Cond: bpf.JumpLessThan, Val: uint32(base), SkipTrue: 2},
		bpf.JumpIf{Cond: bpf.JumpGreaterOrEqual, Val: uint32(base) + uint32(n), SkipTrue: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	)
}

// icmpErrorFilter passes the two ICMP errors a traceroute reads: Time
// Exceeded and Destination Unreachable (RFC 792: 11 and 3; RFC 4443: 3
// and 1).
// tooBigFilter passes path MTU discovery's errors alone: ICMP
// "fragmentation needed" (type 3 code 4) and ICMPv6 "packet too big"
// (type 2), so the sized probes' reader wakes for nothing else.
func tooBigFilter(ipv6 bool) []bpf.Instruction {
	if ipv6 {
		return []bpf.Instruction{
			bpf.LoadAbsolute{Off: 0, Size: 1}, // a = ICMPv6 type
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: icmp6PacketTooBig, SkipTrue: 1},
			bpf.RetConstant{Val: 0xffff},
			bpf.RetConstant{Val: 0},
		}
	}
	return []bpf.Instruction{
		bpf.LoadMemShift{Off: 0},          // x = IP header length
		bpf.LoadIndirect{Off: 0, Size: 1}, // a = ICMP type
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: icmpDestUnreachable, SkipTrue: 3},
		bpf.LoadIndirect{Off: 1, Size: 1}, // a = ICMP code
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: icmpFragNeeded, SkipTrue: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	}
}

func icmpErrorFilter(ipv6 bool) []bpf.Instruction {
	load := []bpf.Instruction{
		bpf.LoadMemShift{Off: 0},          // x = IP header length
		bpf.LoadIndirect{Off: 0, Size: 1}, // a = ICMP type
	}
	if ipv6 {
		// Packet Too Big is its own type on IPv6; IPv4's "fragmentation
		// needed" is an Unreachable's code.
		return []bpf.Instruction{
			bpf.LoadAbsolute{Off: 0, Size: 1}, // a = ICMPv6 type
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: icmp6TimeExceeded, SkipTrue: 2},
			bpf.JumpIf{Cond: bpf.JumpEqual, Val: icmp6PacketTooBig, SkipTrue: 1},
			bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: icmp6DestUnreachable, SkipTrue: 1},
			bpf.RetConstant{Val: 0xffff},
			bpf.RetConstant{Val: 0},
		}
	}
	return append(load,
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: icmpTimeExceeded, SkipTrue: 1},
		bpf.JumpIf{Cond: bpf.JumpNotEqual, Val: icmpDestUnreachable, SkipTrue: 1},
		bpf.RetConstant{Val: 0xffff},
		bpf.RetConstant{Val: 0},
	)
}
