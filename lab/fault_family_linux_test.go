package lab_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
)

// TestFaultFamilies breaks a dual-stack fabric with one spine, so that
// every flow between the racks crosses it: a fault with Family drops that
// family only, every kind without one drops IPv6 as it drops IPv4.
func TestFaultFamilies(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 1, Racks: 2, NodesPerRack: 1, PodsPerNode: 1, LB: true, IPv6: true})
	ctx := t.Context()
	n11, _ := f.Host("n11")
	n21, _ := f.Host("n21")
	n11p1, _ := f.Host("n11p1")
	n21p1, _ := f.Host("n21p1")

	// replies pings from ns to each host over both families: 5 each
	// unless a fault drops them.
	replies := func(t *testing.T, ns string, hosts ...lab.Host) map[netip.Addr]int {
		t.Helper()
		var targets []netip.Addr
		for _, h := range hosts {
			targets = append(targets, h.Addr, h.Addr6)
		}
		return ping(t, ns, targets, 5, 5*time.Millisecond, 300*time.Millisecond)
	}
	inject := func(t *testing.T, ft lab.Fault) {
		t.Helper()
		if err := f.Inject(ctx, ft); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := f.Clear(context.Background()); err != nil {
				t.Errorf("clear: %v", err)
			}
		})
	}
	// want checks 5 replies (up) or none from each address.
	want := func(t *testing.T, got map[netip.Addr]int, up map[netip.Addr]bool) {
		t.Helper()
		for a, ok := range up {
			if w := map[bool]int{true: 5, false: 0}[ok]; got[a] != w {
				t.Errorf("%v: %d of 5 replies, want %d", a, got[a], w)
			}
		}
	}

	for _, tc := range []struct {
		name   string
		family string
		v4, v6 bool // what still passes spine1
	}{
		{"device-loss family ipv6 drops IPv6 only", lab.FamilyIPv6, true, false},
		{"device-loss family ipv4 drops IPv4 only", lab.FamilyIPv4, false, true},
		{"device-loss without family drops both", "", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inject(t, lab.Fault{Kind: lab.FaultDeviceLoss, Device: "spine1", Permille: 1000, Family: tc.family})
			want(t, replies(t, n11.Namespace, n21), map[netip.Addr]bool{n21.Addr: tc.v4, n21.Addr6: tc.v6})
		})
	}

	t.Run("delay family ipv6 delays IPv6 only", func(t *testing.T) {
		to4, to6 := netip.AddrPortFrom(n21.Addr, 7003), netip.AddrPortFrom(n21.Addr6, 7003)
		listen(t, n21.Namespace, to4)
		listen(t, n21.Namespace, to6)
		inject(t, lab.Fault{Kind: lab.FaultDelay, Device: "spine1", Millis: 30, Family: lab.FamilyIPv6})
		rtt4, rtt6 := medianRTT(t, n11.Namespace, to4), medianRTT(t, n11.Namespace, to6)
		t.Logf("median round trip %v over IPv4, %v over IPv6", rtt4, rtt6)
		if rtt4 > 10*time.Millisecond || rtt6 < 55*time.Millisecond || rtt6 > 260*time.Millisecond {
			t.Errorf("round trips %v (IPv4), %v (IPv6), want under 10ms and 55..260ms", rtt4, rtt6)
		}
	})

	t.Run("link-loss drops IPv6 too", func(t *testing.T) {
		inject(t, lab.Fault{Kind: lab.FaultLinkLoss, From: "tor1", To: "spine1", Permille: 1000})
		want(t, replies(t, n11.Namespace, n21), map[netip.Addr]bool{n21.Addr: false, n21.Addr6: false})
	})

	t.Run("partition drops IPv6 too", func(t *testing.T) {
		inject(t, lab.Fault{Kind: lab.FaultPartition, Rack: "r1"})
		want(t, replies(t, n11.Namespace, n21, n11p1), map[netip.Addr]bool{
			n21.Addr: false, n21.Addr6: false, n11p1.Addr: true, n11p1.Addr6: true,
		})
	})

	t.Run("host-nic by family", func(t *testing.T) {
		inject(t, lab.Fault{Kind: lab.FaultHostNIC, Host: "n21", Permille: 1000, Family: lab.FamilyIPv4})
		want(t, replies(t, n11.Namespace, n21), map[netip.Addr]bool{n21.Addr: false, n21.Addr6: true})
		if err := f.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		// Both families: neighbor discovery still passes, data does not.
		inject(t, lab.Fault{Kind: lab.FaultHostNIC, Host: "n21", Permille: 1000})
		want(t, replies(t, n11.Namespace, n21, n21p1), map[netip.Addr]bool{
			n21.Addr: false, n21.Addr6: false, n21p1.Addr: false, n21p1.Addr6: false,
		})
	})

	// Without the neighbor discovery rule, pod to pod would fail here too:
	// the node drops its pod's neighbor solicitations.
	t.Run("pod-node-loss drops IPv6 too", func(t *testing.T) {
		inject(t, lab.Fault{Kind: lab.FaultPodNodeLoss, Permille: 1000})
		want(t, replies(t, n11p1.Namespace, n11, n21p1), map[netip.Addr]bool{
			n11.Addr: false, n11.Addr6: false, n21p1.Addr: true, n21p1.Addr6: true,
		})
	})

	t.Run("lb-loss family ipv6 cuts the IPv6 VIP only", func(t *testing.T) {
		inject(t, lab.Fault{Kind: lab.FaultLBLoss, Permille: 1000, Family: lab.FamilyIPv6})
		got := ping(t, n11.Namespace, []netip.Addr{f.VIP, f.VIP6}, 5, 5*time.Millisecond, 300*time.Millisecond)
		want(t, got, map[netip.Addr]bool{f.VIP: true, f.VIP6: false})
	})

	t.Run("lb-forget forgets IPv6 flows too", func(t *testing.T) {
		for _, n := range f.Nodes() {
			listen(t, n.Namespace, netip.AddrPortFrom(n.Addr6, 8080))
		}
		checkLBForget(t, n11.Namespace, netip.AddrPortFrom(f.VIP6, 8080), func() { inject(t, lab.Fault{Kind: lab.FaultLBForget}) })
	})

	t.Run("blackhole drops a fixed subset of IPv6 flows", func(t *testing.T) {
		to := netip.AddrPortFrom(n21.Addr6, 7002)
		listen(t, n21.Namespace, to)
		inject(t, lab.Fault{Kind: lab.FaultBlackhole, Device: "tor1", Mod: 4})
		first, second := deadFlows(n11.Namespace, n11.Addr6, to, portRange(42000, 24)), deadFlows(n11.Namespace, n11.Addr6, to, portRange(42000, 24))
		t.Logf("black-holed IPv6 source ports: %v", first)
		if len(first) == 0 || len(first) == 24 {
			t.Errorf("%d of 24 IPv6 flows black-holed, want some but not all", len(first))
		}
		if !slices.Equal(first, second) {
			t.Errorf("black-holed flows changed: %v then %v", first, second)
		}
	})
}
