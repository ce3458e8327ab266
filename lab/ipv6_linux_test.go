package lab_test

import (
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
	"golang.org/x/net/icmp"
)

// TestFabricIPv6 builds a dual-stack fabric and checks its IPv6 half:
// reachability, TCP, ECMP over the spines, traceroute hops, the IPv6 VIP.
func TestFabricIPv6(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 3, Racks: 2, NodesPerRack: 2, PodsPerNode: 1, LB: true, IPv6: true})
	n11, _ := f.Host("n11")
	n21, _ := f.Host("n21")

	t.Run("inventory", func(t *testing.T) {
		for _, h := range f.Hosts {
			if !lab.LabRange6.Contains(h.Addr6) || !h.Addr.IsValid() {
				t.Errorf("host %s: addr %v addr6 %v, want both, IPv6 in %v", h.Name, h.Addr, h.Addr6, lab.LabRange6)
			}
		}
		loaded, err := lab.Load(f.Spec.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(loaded.Hosts, f.Hosts) || loaded.VIP6 != f.VIP6 || !loaded.Spec.IPv6 {
			t.Errorf("Load: inventory differs from Up's")
		}
		if got := f.Hops()["2001:2:0:1201::1"]; got != "tor1" {
			t.Errorf("Hops()[2001:2:0:1201::1] = %q, want tor1", got)
		}
	})

	t.Run("sysctls per namespace", func(t *testing.T) {
		for _, tc := range []struct{ dev, key, want string }{
			{"spine1", "net.ipv6.fib_multipath_hash_policy", "3"},
			{"tor2", "net.ipv6.fib_multipath_hash_policy", "3"},
			{"tor2", "net.ipv6.fib_multipath_hash_fields", "63"},
			{"tor2", "net.ipv6.conf.all.forwarding", "1"},
			{"tor2", "net.ipv6.conf.br0.forwarding", "1"},
			{"n21", "net.ipv6.conf.eth0.forwarding", "1"},
			{"n21p1", "net.ipv6.conf.eth0.forwarding", "0"},
			{"n21p1", "net.ipv6.conf.eth0.accept_ra", "0"},
			{"n21p1", "net.ipv6.conf.eth0.autoconf", "0"},
			{"n21p1", "net.ipv6.conf.eth0.accept_dad", "0"},
			{"n21p1", "net.ipv6.conf.eth0.disable_ipv6", "0"},
			{"n21p1", "net.ipv4.ping_group_range", "0\t2147483647"},
			{"n21", "net.ipv6.flowlabel_reflect", "7"},
			{"n21p1", "net.ipv6.flowlabel_reflect", "7"},
		} {
			ns, _ := f.Namespace(tc.dev)
			got, err := lab.Sysctl(ns, tc.key)
			if err != nil || got != tc.want {
				t.Errorf("%s %s = %q, %v; want %q", tc.dev, tc.key, got, err, tc.want)
			}
		}
		// The kernel checks net.ipv4.ping_group_range for ICMPv6 echo
		// sockets too: a pod may open one, a ToR (default "1 0", no group,
		// not even root's) may not.
		for dev, allowed := range map[string]bool{"n21p1": true, "tor2": false} {
			ns, _ := f.Namespace(dev)
			err := lab.Do(ns, func() error {
				c, err := icmp.ListenPacket("udp6", "::")
				if err == nil {
					c.Close()
				}
				return err
			})
			if (err == nil) != allowed {
				t.Errorf("ICMPv6 echo socket in %s: %v, want allowed=%v", dev, err, allowed)
			}
		}
		// ICMPv6 errors are rate-limited, as ICMP's: the kernel's default
		// (100 ms on Linux 6.18), left alone as on the IPv4 side.
		ns, _ := f.Namespace("tor2")
		if got, err := lab.Sysctl(ns, "net.ipv6.icmp.ratelimit"); err != nil || got == "0" {
			t.Errorf("tor2 net.ipv6.icmp.ratelimit = %q, %v; want the default, not 0", got, err)
		}
	})

	t.Run("every node pings every host over both families", func(t *testing.T) {
		// Unprivileged ICMPv6 echo sockets: net.ipv4.ping_group_range
		// covers them.
		var targets []netip.Addr
		for _, h := range f.Hosts {
			targets = append(targets, h.Addr, h.Addr6)
		}
		var wg sync.WaitGroup
		for _, n := range f.Nodes() {
			wg.Go(func() {
				got := ping(t, n.Namespace, targets, 2, 20*time.Millisecond, 400*time.Millisecond)
				for _, a := range targets {
					if got[a] == 0 {
						t.Errorf("%s -> %v: no echo reply", n.Name, a)
					}
				}
			})
		}
		wg.Wait()
	})

	t.Run("TCP over IPv6 across racks and to pods", func(t *testing.T) {
		n11p1, _ := f.Host("n11p1")
		n12p1, _ := f.Host("n12p1")
		n21p1, _ := f.Host("n21p1")
		for _, h := range []lab.Host{n21, n21p1, n12p1} {
			listen(t, h.Namespace, netip.AddrPortFrom(h.Addr6, 7100))
		}
		for _, tc := range []struct{ from, to lab.Host }{{n11, n21}, {n11, n21p1}, {n11, n12p1}, {n11p1, n21}} {
			c, err := dial(tc.from.Namespace, netip.AddrPort{}, netip.AddrPortFrom(tc.to.Addr6, 7100), 2*time.Second)
			if err != nil {
				t.Errorf("%s -> %s over IPv6: %v", tc.from.Name, tc.to.Name, err)
				continue
			}
			if err := roundTrip(c, "prober-lab", 2*time.Second); err != nil {
				t.Errorf("%s -> %s over IPv6: %v", tc.from.Name, tc.to.Name, err)
			}
			abort(c)
		}
	})

	t.Run("ECMP hashes the 5-tuple and the flow label", func(t *testing.T) {
		to := netip.AddrPortFrom(n21.Addr6, 7101)
		listenWith(t, n21.Namespace, net.ListenConfig{Control: labtest.NoAutoFlowLabel}, to)
		fixed, auto := portRange(44000, 16), portRange(44100, 16)
		sc := newSpineCounters(t, f, append(slices.Clone(fixed), auto...))

		// Label 0: the 5-tuple alone picks the spine, the same on every
		// connection, as with IPv4.
		d := net.Dialer{Timeout: 2 * time.Second, Control: labtest.NoAutoFlowLabel}
		first, second := sc.twice(t, n11, to, d, fixed)
		used := map[string]bool{}
		for _, p := range fixed {
			if len(first[p]) != 1 || !slices.Equal(first[p], second[p]) {
				t.Errorf("flow from port %d with label 0 crossed %v, then %v; want one spine, the same", p, first[p], second[p])
			}
			for _, s := range first[p] {
				used[s] = true
			}
		}
		t.Logf("16 flows with label 0 used spines %v", slices.Sorted(maps.Keys(used)))
		if len(used) < 2 {
			t.Errorf("16 flows used spines %v, want more than one", used)
		}

		// The kernel's own label, random per connection: a connection
		// stays on one spine, the next on the same 5-tuple may not.
		first, second = sc.twice(t, n11, to, net.Dialer{Timeout: 2 * time.Second}, auto)
		moved := 0
		for _, p := range auto {
			if len(first[p]) != 1 || len(second[p]) != 1 {
				t.Errorf("connection from port %d crossed %v, then %v; want one spine each", p, first[p], second[p])
			} else if first[p][0] != second[p][0] {
				moved++
			}
		}
		// Chance keeps all 16 on their spine with probability 3^-16.
		t.Logf("%d of 16 5-tuples took another spine on their second connection", moved)
		if moved == 0 {
			t.Errorf("no 5-tuple changed spine with a new flow label: the label is not hashed")
		}
	})

	t.Run("hop limit expires at a spine, then at tor2 on the same link", func(t *testing.T) {
		// Six probes per router fit the ICMPv6 rate limit's burst.
		for port := uint16(45000); port < 45006; port++ {
			spine := hop(t, n11, n21, port, 2, true)
			tor := hop(t, n11, n21, port, 3, true)
			b := spine.As16()
			if !lab.LabRange6.Contains(spine) || f.Hops()[spine.String()] == "" || b[7] != 0x01 || b[15] != 0 {
				t.Errorf("port %d hop limit 2: Time Exceeded from %v, want a spine's address toward tor1", port, spine)
				continue
			}
			b[7], b[15] = 0x02, 1 // tor2's end of the same spine's link
			if want := netip.AddrFrom16(b); tor != want || f.Hops()[tor.String()] != "tor2" {
				t.Errorf("port %d: hop limit 2 at %v, 3 answered from %v, want %v (tor2 on the same spine)", port, spine, tor, want)
			}
		}
	})

	t.Run("the IPv6 VIP balances over the nodes", func(t *testing.T) {
		checkVIPSpreads(t, f, n11.Namespace, netip.AddrPortFrom(f.VIP6, 8080), f.LBSource6, func(h lab.Host) netip.Addr { return h.Addr6 })
	})
}

func portRange(from uint16, n int) []uint16 {
	var ports []uint16
	for i := range n {
		ports = append(ports, from+uint16(i))
	}
	return ports
}

// spineCounters reads every spine's per-source-port counters.
type spineCounters map[string]func() map[uint16]uint64

func newSpineCounters(t *testing.T, f *lab.Fabric, ports []uint16) spineCounters {
	sc := spineCounters{}
	for _, r := range f.Routers {
		if r.Kind == lab.KindSpine {
			sc[r.Name] = labtest.SourcePortCounters(t, r.Namespace, ports)
		}
	}
	return sc
}

func (sc spineCounters) snapshot() map[string]map[uint16]uint64 {
	s := map[string]map[uint16]uint64{}
	for name, read := range sc {
		s[name] = read()
	}
	return s
}

// twice opens one connection per source port from host from to to,
// over IPv6 with d, then all again, and returns for each port the spines
// its first and its second connection crossed.
func (sc spineCounters) twice(t *testing.T, from lab.Host, to netip.AddrPort, d net.Dialer, ports []uint16) (first, second map[uint16][]string) {
	t.Helper()
	s0 := sc.snapshot()
	connectEach(t, from, to, d, ports)
	s1 := sc.snapshot()
	connectEach(t, from, to, d, ports)
	return crossed(s0, s1, ports), crossed(s1, sc.snapshot(), ports)
}

// crossed returns, per port, the spines whose count grew from before to
// after.
func crossed(before, after map[string]map[uint16]uint64, ports []uint16) map[uint16][]string {
	got := map[uint16][]string{}
	for _, p := range ports {
		for s, counts := range after {
			if counts[p] > before[s][p] {
				got[p] = append(got[p], s)
			}
		}
		slices.Sort(got[p])
	}
	return got
}

// connectEach opens one connection per source port, with three round
// trips, and aborts it so the 5-tuple is free at once.
func connectEach(t *testing.T, from lab.Host, to netip.AddrPort, d net.Dialer, ports []uint16) {
	t.Helper()
	for _, p := range ports {
		c, err := dialWith(from.Namespace, d, netip.AddrPortFrom(from.Addr6, p), to)
		if err != nil {
			t.Fatalf("flow from port %d: %v", p, err)
		}
		for range 3 {
			if err := roundTrip(c, "prober-lab", 2*time.Second); err != nil {
				t.Fatalf("flow from port %d: %v", p, err)
			}
		}
		abort(c)
	}
}
