package probe

import (
	"testing"

	"golang.org/x/net/bpf"
)

// runFilter runs a socket filter on pkt as the kernel would (x/net/bpf's
// VM) and reports whether it passes.
func runFilter(t *testing.T, prog []bpf.Instruction, pkt []byte) bool {
	t.Helper()
	vm, err := bpf.NewVM(prog)
	if err != nil {
		t.Fatal(err)
	}
	n, err := vm.Run(pkt)
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// TestTCPPortFilter: the filters pass segments to the reserved ports and
// nothing else. An IPv4 raw socket's filter sees the IP header, with
// options too; an IPv6 one's sees the TCP header at offset 0.
func TestTCPPortFilter(t *testing.T) {
	t.Parallel()
	const base, n = 61000, 16
	for _, f := range testFamilies {
		for _, tc := range []struct {
			dport uint16
			pass  bool
		}{{base, true}, {base + n - 1, true}, {base - 1, false}, {base + n, false}, {9808, false}, {0, false}} {
			pkt := synAck(t, f.dst, f.src, 9808, tc.dport, 1, 2, true, false)
			if f.ipv6 {
				pkt = pkt[ipv6HeaderLen:] // what the kernel runs the filter on
			}
			if got := runFilter(t, tcpPortFilter(f.ipv6, base, n), pkt); got != tc.pass {
				t.Errorf("%s: segment to port %d: passed %v, want %v", f.name, tc.dport, got, tc.pass)
			}
		}
	}
	// IPv4 with options: the port is found past them.
	pkt := synAck(t, testDst, testSrc, 9808, base+1, 1, 2, true, false)
	opts := append(append([]byte{0x46}, pkt[1:20]...), 1, 1, 1, 0) // IHL 6: four bytes of NOPs and an end
	if !runFilter(t, tcpPortFilter(false, base, n), append(opts, pkt[20:]...)) {
		t.Error("ipv4 with options: segment to a reserved port dropped")
	}
	if runFilter(t, tcpPortFilter(true, base, n), []byte{0xee, 0x48}) {
		t.Error("ipv6: a 2-byte payload passed")
	}
}

func TestICMPErrorFilter(t *testing.T) {
	t.Parallel()
	v4 := func(typ uint8) []byte {
		return append([]byte{0x45, 0, 0, 28, 0, 0, 0, 0, 64, 1, 0, 0, 192, 0, 2, 1, 192, 0, 2, 2}, typ, 0, 0, 0, 0, 0, 0, 0)
	}
	v6 := func(typ uint8) []byte { return []byte{typ, 0, 0, 0, 0, 0, 0, 0} }
	for _, tc := range []struct {
		name string
		ipv6 bool
		pkt  []byte
		pass bool
	}{
		{"ipv4 time exceeded", false, v4(icmpTimeExceeded), true},
		{"ipv4 unreachable", false, v4(icmpDestUnreachable), true},
		{"ipv4 echo reply", false, v4(icmpEchoReply), false},
		{"ipv4 echo request", false, v4(icmpEchoRequest), false},
		{"ipv6 time exceeded", true, v6(icmp6TimeExceeded), true},
		{"ipv6 unreachable", true, v6(icmp6DestUnreachable), true},
		{"ipv6 packet too big", true, v6(icmp6PacketTooBig), true},
		{"ipv6 echo request", true, v6(icmp6EchoRequest), false},
		{"ipv6 echo reply", true, v6(icmp6EchoReply), false},
		{"ipv6 neighbor solicitation", true, v6(135), false},
		{"ipv6 neighbor advertisement", true, v6(136), false},
		{"ipv6 ipv4's time exceeded", true, v6(icmpTimeExceeded), false},
		{"ipv6 empty", true, nil, false},
	} {
		if got := runFilter(t, icmpErrorFilter(tc.ipv6), tc.pkt); got != tc.pass {
			t.Errorf("%s: passed %v, want %v", tc.name, got, tc.pass)
		}
	}
}
