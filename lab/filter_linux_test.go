package lab_test

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
)

// TestNetworkFilters: with DropEcho the nodes answer no echo but TCP, and
// a pod (no firewall of its node's) still answers echo; with
// SilentRouters a trace's first hop stays silent where it answers
// without; both over IPv4 and IPv6, and both survive Clear, being the
// network and not a fault.
func TestNetworkFilters(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 1, Racks: 2, NodesPerRack: 1, PodsPerNode: 1, LB: false, IPv6: true, DropEcho: true, SilentRouters: true})
	n11, _ := f.Host("n11")
	n21, _ := f.Host("n21")
	p21, _ := f.Host("n21p1")
	if err := f.Clear(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := ping(t, n11.Namespace, []netip.Addr{n21.Addr, n21.Addr6, p21.Addr, p21.Addr6}, 3, 50*time.Millisecond, 500*time.Millisecond)
	for _, a := range []netip.Addr{n21.Addr, n21.Addr6} {
		if got[a] != 0 {
			t.Errorf("node %v answered %d echoes, want none (drop_echo)", a, got[a])
		}
	}
	for _, a := range []netip.Addr{p21.Addr, p21.Addr6} {
		if got[a] == 0 {
			t.Errorf("pod %v answered no echo: drop_echo is the nodes' firewall, not the fabric's", a)
		}
	}
	for _, a := range []netip.Addr{n21.Addr, n21.Addr6} {
		listen(t, n21.Namespace, netip.AddrPortFrom(a, 8080))
		c, err := dial(n11.Namespace, netip.AddrPort{}, netip.AddrPortFrom(a, 8080), 2*time.Second)
		if err != nil {
			t.Errorf("tcp to %v with echo dropped: %v", a, err)
			continue
		}
		abort(c)
	}
	for _, v6 := range []bool{false, true} {
		// The first hop is tor1; then the spine. Three tries each, as the
		// routers' rate limit would not silence the first.
		for ttl := 1; ttl <= 2; ttl++ {
			for try := range 3 {
				if a := hop(t, n11, n21, uint16(33000+10*ttl+try), ttl, v6); a.IsValid() {
					t.Errorf("ttl %d (ipv6 %v): %v answered time exceeded, want silent routers", ttl, v6, a)
				}
			}
		}
	}

	// The same fabric without the filters answers both: the test sees them.
	g := labtest.Up(t, lab.Spec{Spines: 1, Racks: 2, NodesPerRack: 1, PodsPerNode: -1, LB: false})
	m11, _ := g.Host("n11")
	m21, _ := g.Host("n21")
	if got := ping(t, m11.Namespace, []netip.Addr{m21.Addr}, 3, 50*time.Millisecond, 500*time.Millisecond); got[m21.Addr] == 0 {
		t.Errorf("without drop_echo, %v answered no echo", m21.Addr)
	}
	if a := hop(t, m11, m21, 33100, 1, false); !a.IsValid() {
		t.Error("without silent_routers, the first hop did not answer")
	}
}
