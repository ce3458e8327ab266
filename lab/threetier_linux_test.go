package lab_test

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
)

// TestThreeTiers: a three-tier Clos (2 fabric pods of 2 racks, 2
// aggregation switches a pod, 2 super-spines, the LB on them) forwards
// both families; a trace between pods climbs the ToR, an aggregation
// switch of the source's pod, a super-spine, one of the target's pod,
// and the target's ToR; within a pod it stays below the super-spines;
// flows spread over the super-spines; and a node reaches the VIP.
func TestThreeTiers(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 2, SuperSpines: 2, RacksPerPod: 2, Racks: 4, NodesPerRack: 1, PodsPerNode: -1, LB: true, IPv6: true})
	n11, _ := f.Host("n11")
	n21, _ := f.Host("n21")
	n41, _ := f.Host("n41")
	if got := ping(t, n11.Namespace, []netip.Addr{n41.Addr, n41.Addr6, n21.Addr, n21.Addr6}, 3, 50*time.Millisecond, time.Second); len(got) != 4 {
		t.Fatalf("n11 to n41 and n21: replies %v, want some from each address", got)
	}
	hops := f.Hops()
	for _, v6 := range []bool{false, true} {
		for _, tc := range []struct {
			to   lab.Host
			want []string // device name prefixes, TTL 1 up
		}{
			{n41, []string{"tor1", "agg1", "super", "agg2", "tor4"}},
			{n21, []string{"tor1", "agg1", "tor2"}},
		} {
			for ttl, want := range tc.want {
				a := hop(t, n11, tc.to, 33600, ttl+1, v6)
				if dev := hops[a.String()]; !strings.HasPrefix(dev, want) {
					t.Errorf("n11 -> %s (ipv6 %v) TTL %d answered by %v (%q), want %s*", tc.to.Name, v6, ttl+1, a, dev, want)
				}
			}
		}
	}
	// Flows from n21 to n41 spread over the super-spines (TTL 3); one
	// probe a port stays under the routers' ICMP rate limit.
	supers := map[string]bool{}
	for p := range uint16(8) {
		if dev := hops[hop(t, n21, n41, 33700+p, 3, false).String()]; strings.HasPrefix(dev, "super") {
			supers[dev] = true
		}
	}
	if len(supers) < 2 {
		t.Errorf("8 flows between pods crossed super-spines %v, want both", supers)
	}
	for _, n := range f.Nodes() { // the VIP's backends
		listen(t, n.Namespace, netip.AddrPortFrom(n.Addr, 8082))
		listen(t, n.Namespace, netip.AddrPortFrom(n.Addr6, 8082))
	}
	for _, vip := range []netip.Addr{f.VIP, f.VIP6} {
		c, err := dial(n11.Namespace, netip.AddrPort{}, netip.AddrPortFrom(vip, 8082), 2*time.Second)
		if err != nil {
			t.Errorf("n11 to the VIP %v: %v", vip, err)
			continue
		}
		if err := roundTrip(c, "prober-lab", 2*time.Second); err != nil {
			t.Errorf("n11 to the VIP %v: %v", vip, err)
		}
		abort(c)
	}
}
