package lab_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
)

// TestOverlay: pods on a flannel-style VXLAN overlay reach each other over
// both families, encapsulated (the spines forward UDP 8472 and no TCP of
// the pods' flows), spread over the spines by the inner flows' hash, at
// MTU 1450; the routers know no pod address, and a pod reaches the VIP
// masqueraded; a pod's trace to another node's pod hears that node from
// its tunnel address and no router.
func TestOverlay(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 3, Racks: 2, NodesPerRack: 1, PodsPerNode: 1, LB: true, IPv6: true, Overlay: true})
	p11, _ := f.Host("n11p1")
	p21, _ := f.Host("n21p1")
	n21, _ := f.Host("n21")
	if !n21.Tunnel.IsValid() || !n21.PodCIDR.Contains(n21.Tunnel) || !n21.PodCIDR6.Contains(n21.Tunnel6) {
		t.Fatalf("n21: tunnel %v %v, pod CIDRs %v %v: want the first address of each", n21.Tunnel, n21.Tunnel6, n21.PodCIDR, n21.PodCIDR6)
	}
	if got := ping(t, p11.Namespace, []netip.Addr{p21.Addr, p21.Addr6}, 3, 50*time.Millisecond, time.Second); got[p21.Addr] == 0 || got[p21.Addr6] == 0 {
		t.Fatalf("pod to pod over the overlay: replies %v, want some from both families", got)
	}

	ports := portRange(41000, 24)
	udp := map[string]func() uint64{}
	tcp := map[string]func() map[uint16]uint64{}
	for _, r := range f.Routers {
		if r.Kind == lab.KindSpine {
			udp[r.Name] = labtest.UDPDestPortCounter(t, r.Namespace, 8472)
			tcp[r.Name] = labtest.SourcePortCounters(t, r.Namespace, ports)
		}
	}
	listen(t, p21.Namespace, netip.AddrPortFrom(p21.Addr, 8080))
	before := map[string]uint64{}
	for s, read := range udp {
		before[s] = read()
	}
	for _, p := range ports {
		c, err := dial(p11.Namespace, netip.AddrPortFrom(p11.Addr, p), netip.AddrPortFrom(p21.Addr, 8080), 2*time.Second)
		if err != nil {
			t.Fatalf("pod flow from port %d: %v", p, err)
		}
		if err := roundTrip(c, "prober-lab", 2*time.Second); err != nil {
			t.Fatalf("pod flow from port %d: %v", p, err)
		}
		abort(c)
	}
	spread := 0
	for s, read := range udp {
		if read() > before[s] {
			spread++
		}
		for p, n := range tcp[s]() {
			if n > 0 {
				t.Errorf("%s forwarded %d unencapsulated segments of the pod flow from port %d", s, n, p)
			}
		}
	}
	if spread < 2 {
		t.Errorf("24 pod flows' VXLAN packets crossed %d spines, want the inner flows spread over at least 2 of 3", spread)
	}

	// A pod reaches the VIP, masqueraded by its node as flannel does: the
	// LB could not answer a pod address.
	for _, n := range f.Nodes() {
		listen(t, n.Namespace, netip.AddrPortFrom(n.Addr, 8081))
		listen(t, n.Namespace, netip.AddrPortFrom(n.Addr6, 8081))
	}
	for _, vip := range []netip.Addr{f.VIP, f.VIP6} {
		c, err := dial(p11.Namespace, netip.AddrPort{}, netip.AddrPortFrom(vip, 8081), 2*time.Second)
		if err != nil {
			t.Errorf("pod to the VIP %v: %v", vip, err)
			continue
		}
		if err := roundTrip(c, "prober-lab", 2*time.Second); err != nil {
			t.Errorf("pod to the VIP %v: %v", vip, err)
		}
		abort(c)
	}

	// The underlay routes no pod address: a spine cannot reach one.
	if c, err := dial(f.Routers[0].Namespace, netip.AddrPort{}, netip.AddrPortFrom(p21.Addr, 8080), time.Second); err == nil {
		abort(c)
		t.Errorf("%s reached pod %v: the underlay must know no pod address", f.Routers[0].Name, p21.Addr)
	}

	// A pod's path MTU is the overlay's.
	var mtu int
	if err := lab.Do(p11.Namespace, func() error {
		ifc, err := net.InterfaceByName("eth0")
		if err == nil {
			mtu = ifc.MTU
		}
		return err
	}); err != nil || mtu != 1450 {
		t.Errorf("pod eth0 MTU %d (%v), want 1450", mtu, err)
	}

	// Traced from the pod: its node (TTL 1), then the other node from
	// its tunnel address (TTL 2): the underlay is out of sight.
	if a := hop(t, p11, p21, 33500, 2, false); a != n21.Tunnel {
		t.Errorf("pod trace TTL 2 answered by %v, want n21's tunnel address %v", a, n21.Tunnel)
	}
}
