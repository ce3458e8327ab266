package lab_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
)

// TestFabric builds the default fabric once and checks it, then breaks it
// one fault at a time; each subtest leaves it without faults.
func TestFabric(t *testing.T) {
	f := labtest.Up(t, lab.DefaultSpec())
	ctx := t.Context()
	n11, _ := f.Host("n11")
	n21, _ := f.Host("n21")

	t.Run("inventory", func(t *testing.T) {
		if got, want := len(f.Hosts), 18; got != want {
			t.Errorf("hosts: got %d, want %d", got, want)
		}
		loaded, err := lab.Load(f.Spec.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.EqualFunc(loaded.Hosts, f.Hosts, func(a, b lab.Host) bool { return a == b }) || loaded.VIP != f.VIP {
			t.Errorf("Load: inventory differs from Up's")
		}
		hops := f.Hops()
		for addr, want := range map[string]string{"198.18.2.1": "tor1", "198.18.2.0": "spine2", "198.19.3.1": "tor3", "198.18.1.255": "lb", f.VIP.String(): "lb"} {
			if hops[addr] != want {
				t.Errorf("Hops()[%s] = %q, want %q", addr, hops[addr], want)
			}
		}
	})

	t.Run("sysctls per namespace", func(t *testing.T) {
		for _, tc := range []struct{ dev, key, want string }{
			{"spine1", "net.ipv4.fib_multipath_hash_policy", "3"},
			{"tor2", "net.ipv4.fib_multipath_hash_policy", "3"},
			{"tor2", "net.ipv4.fib_multipath_hash_fields", "55"},
			{"tor2", "net.ipv4.ip_forward", "1"},
			{"n21p1", "net.ipv4.fib_multipath_hash_policy", "0"},
			{"n21p1", "net.ipv4.ip_forward", "0"},
			{"n21p1", "net.ipv4.ping_group_range", "0\t2147483647"},
		} {
			ns, _ := f.Namespace(tc.dev)
			got, err := lab.Sysctl(ns, tc.key)
			if err != nil || got != tc.want {
				t.Errorf("%s %s = %q, %v; want %q", tc.dev, tc.key, got, err, tc.want)
			}
		}
	})

	t.Run("every node reaches every host", func(t *testing.T) {
		var targets []netip.Addr
		for _, h := range f.Hosts {
			targets = append(targets, h.Addr)
		}
		var wg sync.WaitGroup
		for _, n := range f.Nodes() {
			wg.Go(func() {
				got := ping(t, n.Namespace, targets, 2, 20*time.Millisecond, 400*time.Millisecond)
				for _, h := range f.Hosts {
					if got[h.Addr] == 0 {
						t.Errorf("%s -> %s (%v): no echo reply", n.Name, h.Name, h.Addr)
					}
				}
			})
		}
		wg.Wait()
	})

	t.Run("ECMP spreads flows over all spines", func(t *testing.T) {
		listen(t, n21.Namespace, netip.AddrPortFrom(n21.Addr, 7001))
		var sports []uint16
		for i := range 16 {
			sports = append(sports, uint16(41000+i))
		}
		read := map[string]func() map[uint16]uint64{}
		for _, s := range []string{"spine1", "spine2", "spine3"} {
			ns, _ := f.Namespace(s)
			read[s] = labtest.SourcePortCounters(t, ns, sports)
		}
		// Each 5-tuple twice, as two connections: a switch hashes headers,
		// so the second must take the first one's spine.
		for range 2 {
			for _, p := range sports {
				c, err := dial(n11.Namespace, netip.AddrPortFrom(n11.Addr, p), netip.AddrPortFrom(n21.Addr, 7001), 2*time.Second)
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
		perSpine := map[string]int{}
		for _, p := range sports {
			var on []string
			for s, r := range read {
				if n := r()[p]; n > 0 {
					on = append(on, fmt.Sprintf("%s:%d", s, n))
					perSpine[s]++
				}
			}
			if len(on) != 1 {
				t.Errorf("flow from port %d crossed %d spines (%v), want exactly 1", p, len(on), on)
			}
		}
		t.Logf("flows per spine: %v", perSpine)
		if len(perSpine) != 3 {
			t.Errorf("16 flows used spines %v, want all 3", perSpine)
		}
	})

	t.Run("traceroute hops name the link taken", func(t *testing.T) {
		// TTL 2 expires at the spine the ToR hashed the flow to, TTL 3 at
		// tor2, which must answer from its interface on that same spine
		// (icmp_errors_use_inbound_ifaddr), not from the one its ECMP
		// route back picks. Six probes per router fit the ICMP rate
		// limit's burst.
		for port := uint16(43000); port < 43006; port++ {
			spine := hop(t, n11, n21, port, 2, false)
			tor := hop(t, n11, n21, port, 3, false)
			s := spine.As4()
			if f.Hops()[spine.String()] == "" || s[3] != 0 {
				t.Errorf("port %d ttl 2: answer from %v, want a spine's address toward tor1", port, spine)
				continue
			}
			if want := netip.AddrFrom4([4]byte{198, 18, s[2], 3}); tor != want {
				t.Errorf("port %d: ttl 2 at %v, ttl 3 answered from %v, want %v (tor2 on the same spine)", port, spine, tor, want)
			}
		}
	})

	t.Run("device loss then clear", func(t *testing.T) {
		if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultDeviceLoss, Device: "tor1", Permille: 300}); err != nil {
			t.Fatal(err)
		}
		const probes = 400
		got := ping(t, n11.Namespace, []netip.Addr{n21.Addr}, probes, 2*time.Millisecond, 500*time.Millisecond)
		// Request and reply both cross tor1: 1 - 0.7^2 = 0.51 per round
		// trip; 400 probes put 4.5 standard deviations inside the band.
		loss := 1 - float64(got[n21.Addr])/probes
		t.Logf("round-trip loss through tor1 at 300 per mille: %.3f", loss)
		if loss < 0.40 || loss > 0.62 {
			t.Errorf("loss %.3f outside 0.40..0.62", loss)
		}
		if err := f.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		got = ping(t, n11.Namespace, []netip.Addr{n21.Addr}, 100, 2*time.Millisecond, 500*time.Millisecond)
		if got[n21.Addr] != 100 {
			t.Errorf("after clear: %d of 100 replies, want all", got[n21.Addr])
		}
	})

	t.Run("blackhole drops a fixed subset of flows", func(t *testing.T) {
		listen(t, n21.Namespace, netip.AddrPortFrom(n21.Addr, 7002))
		if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultBlackhole, Device: "tor1", Mod: 4}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Clear(context.Background()) })
		to := netip.AddrPortFrom(n21.Addr, 7002)
		round := func() []uint16 { return deadFlows(n11.Namespace, n11.Addr, to, portRange(42000, 24)) }
		first, second := round(), round()
		t.Logf("black-holed source ports: %v", first)
		if len(first) == 0 || len(first) == 24 {
			t.Errorf("%d of 24 flows black-holed, want some but not all", len(first))
		}
		if !slices.Equal(first, second) {
			t.Errorf("black-holed flows changed: %v then %v", first, second)
		}
	})

	t.Run("LB balances, then forgets established flows", func(t *testing.T) {
		if err := f.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		vip := netip.AddrPortFrom(f.VIP, 8080)
		checkVIPSpreads(t, f, n11.Namespace, vip, f.LBSource, func(h lab.Host) netip.Addr { return h.Addr })
		checkLBForget(t, n11.Namespace, vip, func() {
			if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultLBForget}); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Clear(context.Background()) })
		})
	})

	t.Run("LB loss hits the LB path only", func(t *testing.T) {
		if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultLBLoss, Permille: 1000}); err != nil {
			t.Fatal(err)
		}
		defer f.Clear(context.Background())
		got := ping(t, n11.Namespace, []netip.Addr{f.VIP, n21.Addr}, 5, 5*time.Millisecond, 300*time.Millisecond)
		if got[f.VIP] != 0 || got[n21.Addr] != 5 {
			t.Errorf("lb-loss 1000: VIP %d/5 replies (want 0), n21 %d/5 (want 5)", got[f.VIP], got[n21.Addr])
		}
	})

	t.Run("faults compose and clear together", func(t *testing.T) {
		for _, ft := range []lab.Fault{
			{Kind: lab.FaultDeviceLoss, Device: "spine1", Permille: 1000},
			{Kind: lab.FaultLinkLoss, From: "tor1", To: "spine2", Permille: 1000, Both: true},
			{Kind: lab.FaultLinkLoss, From: "tor1", To: "spine3", Permille: 1000},
		} {
			if err := f.Inject(ctx, ft); err != nil {
				t.Fatal(err)
			}
		}
		// tor1 -> spine1, spine2, spine3 all drop everything: rack 1 is cut off.
		if got := ping(t, n11.Namespace, []netip.Addr{n21.Addr}, 20, 2*time.Millisecond, 300*time.Millisecond); got[n21.Addr] != 0 {
			t.Errorf("with every uplink of tor1 broken: %d of 20 replies, want 0", got[n21.Addr])
		}
		if err := f.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		if got := ping(t, n11.Namespace, []netip.Addr{n21.Addr}, 20, 2*time.Millisecond, 300*time.Millisecond); got[n21.Addr] != 20 {
			t.Errorf("after clear: %d of 20 replies, want 20", got[n21.Addr])
		}
	})

	t.Run("mtu black hole", func(t *testing.T) {
		// Every uplink of tor1 passes 1,200 bytes: small echoes and those
		// under the MTU reach n21, a 1,400-byte one (DF set) vanishes,
		// and no "fragmentation needed" tells the sender (it would retry
		// smaller and pass). Clear lets them through again.
		for _, s := range []string{"spine1", "spine2", "spine3"} {
			if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultMTUBlackhole, From: "tor1", To: s, MTU: 1200}); err != nil {
				t.Fatal(err)
			}
		}
		for _, tc := range []struct{ size, want int }{{0, 5}, {1200, 5}, {1400, 0}} {
			if got := pingSized(t, n11.Namespace, []netip.Addr{n21.Addr}, tc.size, 5, 5*time.Millisecond, 300*time.Millisecond); got[n21.Addr] != tc.want {
				t.Errorf("mtu-blackhole 1200 on tor1's uplinks, %d-byte echoes n11 -> n21: %d/5 replies, want %d", tc.size, got[n21.Addr], tc.want)
			}
		}
		if err := f.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		if got := pingSized(t, n11.Namespace, []netip.Addr{n21.Addr}, 1400, 5, 5*time.Millisecond, 300*time.Millisecond); got[n21.Addr] != 5 {
			t.Errorf("after clear, 1400-byte echoes: %d/5 replies, want 5", got[n21.Addr])
		}
	})

	t.Run("mtu signals", func(t *testing.T) {
		// Every link of tor1 to a spine at 1,200 bytes, both ends, the
		// routers telling senders: the first 1,400-byte echo dies with a
		// "fragmentation needed" that n11 learns the path MTU from, and
		// the later ones pass, fragmented (as n21's replies do once it
		// learns too). Clear restores the links' MTU.
		for _, s := range []string{"spine1", "spine2", "spine3"} {
			if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultMTU, From: "tor1", To: s, MTU: 1200}); err != nil {
				t.Fatal(err)
			}
		}
		if got := pingSized(t, n11.Namespace, []netip.Addr{n21.Addr}, 1400, 5, 100*time.Millisecond, 300*time.Millisecond); got[n21.Addr] < 3 {
			t.Errorf("mtu 1200 on tor1's uplinks, 1400-byte echoes n11 -> n21: %d/5 replies, want 3 or more once the path MTU is learnt", got[n21.Addr])
		}
		var pmtu int
		if err := lab.Do(n11.Namespace, func() error {
			rs, err := netlink.RouteGet(n21.Addr.AsSlice())
			if err == nil && len(rs) > 0 {
				pmtu = rs[0].MTU
			}
			return err
		}); err != nil || pmtu != 1200 {
			t.Errorf("n11's path MTU to n21: %d (%v), want 1200, learnt from the routers' ICMP", pmtu, err)
		}
		if err := f.Clear(ctx); err != nil {
			t.Fatal(err)
		}
		tor1, _ := f.Router("tor1")
		var mtu int
		lab.Do(tor1.Namespace, func() error {
			i, err := net.InterfaceByName("spine2")
			if err == nil {
				mtu = i.MTU
			}
			return err
		})
		if mtu != lab.LinkMTU {
			t.Errorf("after clear, tor1's link to spine2 at MTU %d, want %d", mtu, lab.LinkMTU)
		}
	})

	t.Run("partition", func(t *testing.T) {
		if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultPartition, Zone: "z1"}); err != nil {
			t.Fatal(err)
		}
		defer f.Clear(context.Background())
		n12, _ := f.Host("n12")
		n31, _ := f.Host("n31")
		got := ping(t, n11.Namespace, []netip.Addr{n12.Addr, n21.Addr, f.VIP}, 5, 5*time.Millisecond, 300*time.Millisecond)
		if got[n12.Addr] != 5 || got[n21.Addr] != 0 || got[f.VIP] != 0 {
			t.Errorf("zone z1 partitioned, from n11: n12 %d/5 (want 5), n21 %d/5 (want 0), VIP %d/5 (want 0)", got[n12.Addr], got[n21.Addr], got[f.VIP])
		}
		if got := ping(t, n21.Namespace, []netip.Addr{n31.Addr}, 5, 5*time.Millisecond, 300*time.Millisecond); got[n31.Addr] != 5 {
			t.Errorf("z2 -> z3 during z1's partition: %d/5 replies, want 5", got[n31.Addr])
		}
	})

	t.Run("host NIC loss", func(t *testing.T) {
		if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultHostNIC, Host: "n21", Permille: 1000}); err != nil {
			t.Fatal(err)
		}
		defer f.Clear(context.Background())
		n22, _ := f.Host("n22")
		pod, _ := f.Host("n21p1")
		got := ping(t, n11.Namespace, []netip.Addr{n21.Addr, pod.Addr, n22.Addr}, 5, 5*time.Millisecond, 300*time.Millisecond)
		if got[n21.Addr] != 0 || got[pod.Addr] != 0 || got[n22.Addr] != 5 {
			t.Errorf("n21's NIC dropping all: n21 %d/5 (want 0), n21p1 %d/5 (want 0), n22 %d/5 (want 5)", got[n21.Addr], got[pod.Addr], got[n22.Addr])
		}
	})

	t.Run("port loss", func(t *testing.T) {
		// Every TCP packet to port 8053 of n21's pod dropped at n21:
		// the pod's other port and n21's own 8053 pass.
		pod, _ := f.Host("n21p1")
		n21ns := n21.Namespace
		for _, a := range []netip.AddrPort{netip.AddrPortFrom(pod.Addr, 8053), netip.AddrPortFrom(pod.Addr, 8054), netip.AddrPortFrom(n21.Addr, 8053)} {
			ns := pod.Namespace
			if a.Addr() == n21.Addr {
				ns = n21ns
			}
			listen(t, ns, a)
		}
		if err := f.Inject(ctx, lab.Fault{Kind: lab.FaultPortLoss, Host: "n21", Proto: "tcp", Port: 8053, Addr: pod.Addr.String(), Permille: 1000}); err != nil {
			t.Fatal(err)
		}
		defer f.Clear(context.Background())
		for _, tc := range []struct {
			to   netip.AddrPort
			pass bool
		}{{netip.AddrPortFrom(pod.Addr, 8053), false}, {netip.AddrPortFrom(pod.Addr, 8054), true}, {netip.AddrPortFrom(n21.Addr, 8053), true}} {
			c, err := dial(n11.Namespace, netip.AddrPortFrom(n11.Addr, 0), tc.to, 500*time.Millisecond)
			if c != nil {
				c.Close()
			}
			if (err == nil) != tc.pass {
				t.Errorf("n11 -> %s with port-loss on n21's pod's tcp/8053: dial error %v, want it to pass: %v", tc.to, err, tc.pass)
			}
		}
	})

	t.Run("bad faults", func(t *testing.T) {
		for _, tc := range []struct {
			ft   lab.Fault
			want string
		}{
			{lab.Fault{Kind: "melt"}, `kind: "melt" not one of`},
			{lab.Fault{Kind: lab.FaultDeviceLoss, Device: "spine9", Permille: 5}, `device: unknown device "spine9"`},
			{lab.Fault{Kind: lab.FaultDeviceLoss, Device: "spine1", Permille: 1001}, "permille: 1001 not in 1..1000"},
			{lab.Fault{Kind: lab.FaultLinkLoss, From: "tor1", To: "tor2", Permille: 5}, "tor1 has no link to tor2"},
			{lab.Fault{Kind: lab.FaultBlackhole, Device: "tor1", Mod: 1}, "mod: 1 not in 2..1024"},
			{lab.Fault{Kind: lab.FaultPartition, Rack: "r1", Zone: "z1"}, "exactly one of rack and zone"},
			{lab.Fault{Kind: lab.FaultLBForget, Permille: 5}, "permille: not used by lb-forget"},
		} {
			err := f.Inject(ctx, tc.ft)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Inject(%v) = %v, want error containing %q", tc.ft, err, tc.want)
			}
		}
	})

	t.Run("Command runs in the namespace", func(t *testing.T) {
		cmd, err := f.Command(ctx, "n21", "cat", "/proc/self/net/dev")
		if errors.Is(err, os.ErrNotExist) || (err != nil && strings.Contains(err.Error(), "executable file not found")) {
			t.Skip("no cat")
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err == nil {
			cmd.Wait()
			t.Fatal("plain cmd.Start ran a lab command outside its namespace")
		}
		cmd, err = f.Command(ctx, "n21", "cat", "/proc/self/net/dev")
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		cmd.Stdout = &out
		if err := lab.Start(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatal(err)
		}
		// n21 has eth0 and its pod's veth p1; the test's own namespace
		// has no p1.
		if !strings.Contains(out.String(), "p1:") || !strings.Contains(out.String(), "eth0:") {
			t.Errorf("/proc/self/net/dev in n21:\n%s\nwant eth0 and p1", out.String())
		}
	})
}

// failingCtx reports cancellation from its n-th Err call on, so Up fails
// in the middle of building.
type failingCtx struct {
	context.Context
	calls, n int
}

func (c *failingCtx) Err() error {
	c.calls++
	if c.calls >= c.n {
		return context.Canceled
	}
	return nil
}

func TestUpFailureTearsDown(t *testing.T) {
	labtest.NeedNetAdmin(t)
	prefix := labtest.Prefix(t)
	t.Cleanup(func() { lab.Down(prefix) })
	spec := lab.DefaultSpec()
	spec.Prefix = prefix
	_, err := lab.Up(&failingCtx{Context: t.Context(), n: 20}, spec, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Up with a context cancelled midway: %v, want context.Canceled", err)
	}
	left, _ := os.ReadDir("/run/netns")
	for _, e := range left {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			t.Errorf("namespace %s left after a failed Up", e.Name())
		}
	}

	f := labtest.Up(t, lab.Spec{Spines: 1, Racks: 1, NodesPerRack: 1, PodsPerNode: -1})
	again := f.Spec
	if _, err := lab.Up(t.Context(), again, nil); err == nil || !strings.Contains(err.Error(), "lab down --prefix "+again.Prefix) {
		t.Errorf("Up over a running lab: %v, want a refusal naming 'lab down'", err)
	}
	if err := lab.Do(f.Hosts[0].Namespace, func() error { return nil }); err != nil {
		t.Errorf("the running lab was harmed by the refused Up: %v", err)
	}
}

func TestDown(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 1, Racks: 1, NodesPerRack: 1, PodsPerNode: -1})
	prefix := f.Spec.Prefix
	if err := lab.Do(prefix+"-n11", func() error { return nil }); err != nil {
		t.Fatalf("Do in a live namespace: %v", err)
	}
	if err := lab.Down(prefix); err != nil {
		t.Fatalf("Down: %v", err)
	}
	left, _ := os.ReadDir("/run/netns")
	for _, e := range left {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			t.Errorf("namespace %s left after Down", e.Name())
		}
	}
	if _, err := lab.Load(prefix); !errors.Is(err, lab.ErrNoLab) {
		t.Errorf("Load after Down: %v, want ErrNoLab", err)
	}
	if err := lab.Down(prefix); err != nil {
		t.Errorf("second Down: %v, want nil (idempotent)", err)
	}
	if err := lab.Do(prefix+"-n11", func() error { return nil }); err == nil {
		t.Errorf("Do in a removed namespace succeeded")
	}
}

func TestLBPorts(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 1, Racks: 1, NodesPerRack: 2, PodsPerNode: -1, LB: true, LBPorts: []uint16{8080}})
	n11, _ := f.Host("n11")
	for _, n := range f.Nodes() {
		listen(t, n.Namespace, netip.AddrPortFrom(n.Addr, 8080))
		listen(t, n.Namespace, netip.AddrPortFrom(n.Addr, 8081))
	}
	c, err := dial(n11.Namespace, netip.AddrPort{}, netip.AddrPortFrom(f.VIP, 8080), 2*time.Second)
	if err != nil {
		t.Fatalf("VIP:8080, a balanced port: %v", err)
	}
	if err := roundTrip(c, "hello", 2*time.Second); err != nil {
		t.Errorf("VIP:8080: %v", err)
	}
	abort(c)
	// 8081 is not balanced: the LB itself owns the VIP and refuses.
	if c, err := dial(n11.Namespace, netip.AddrPort{}, netip.AddrPortFrom(f.VIP, 8081), 2*time.Second); err == nil {
		abort(c)
		t.Errorf("VIP:8081 connected, want refused (only 8080 is balanced)")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("VIP:8081: %v, want connection refused", err)
	}
}

// TestControlPlaneFabric: the fabric a real cluster runs on. The control
// plane's namespace answers on its own address from every rack, the VIP
// forwards the API server port to it, and an address in a node's pod
// CIDR (as a CNI would give a pod) is reached across the fabric; on a
// dual-stack fabric, over both families.
func TestControlPlaneFabric(t *testing.T) {
	for _, ipv6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "dual stack"}[ipv6], func(t *testing.T) {
			f := labtest.Up(t, lab.Spec{Spines: 2, Racks: 2, NodesPerRack: 1, PodsPerNode: -1, LB: true, ControlPlane: true, PodCIDRs: true, IPv6: ipv6})
			cp := f.ControlPlane
			if cp == nil {
				t.Fatal("no control plane")
			}
			n21, _ := f.Host("n21")
			checkControlPlane(t, f, cp.Addr, f.VIP, n21.PodCIDR)
			if ipv6 {
				checkControlPlane(t, f, cp.Addr6, f.VIP6, n21.PodCIDR6)
			}
		})
	}
}

// checkControlPlane dials the control plane at cp, directly and through
// vip, and the first address of n21's pod CIDR, from n11 and from the
// control plane.
func checkControlPlane(t *testing.T, f *lab.Fabric, cp, vip netip.Addr, podCIDR netip.Prefix) {
	t.Helper()
	listen(t, f.ControlPlane.Namespace, netip.AddrPortFrom(cp, lab.APIServerPort))
	n11, _ := f.Host("n11")
	n21, _ := f.Host("n21")
	pod := podCIDR.Addr().Next() // as a CNI's first pod on n21
	if err := lab.Do(n21.Namespace, func() error {
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		// No duplicate address detection: an IPv6 address is tentative,
		// and cannot be bound, until it ends, even on lo.
		return netlink.AddrAdd(lo, &netlink.Addr{IPNet: &net.IPNet{IP: pod.AsSlice(), Mask: net.CIDRMask(pod.BitLen(), pod.BitLen())}, Flags: unix.IFA_F_NODAD})
	}); err != nil {
		t.Fatal(err)
	}
	listen(t, n21.Namespace, netip.AddrPortFrom(pod, 9808))
	for _, to := range []netip.AddrPort{
		netip.AddrPortFrom(cp, lab.APIServerPort),  // direct, through a spine
		netip.AddrPortFrom(vip, lab.APIServerPort), // through the LB
		netip.AddrPortFrom(pod, 9808),              // n21's pod CIDR, from rack 1
	} {
		c, err := dial(n11.Namespace, netip.AddrPort{}, to, 2*time.Second)
		if err != nil {
			t.Errorf("n11 -> %v: %v", to, err)
			continue
		}
		if err := roundTrip(c, "hello", 2*time.Second); err != nil {
			t.Errorf("n11 -> %v: %v", to, err)
		}
		abort(c)
	}
	// The control plane reaches the pod CIDRs: kube-proxy's replies to a
	// pod that called the kubernetes Service take this path back.
	c, err := dial(f.ControlPlane.Namespace, netip.AddrPort{}, netip.AddrPortFrom(pod, 9808), 2*time.Second)
	if err != nil {
		t.Fatalf("cp -> pod %v: %v", pod, err)
	}
	abort(c)
}

// checkVIPSpreads opens 12 connections from ns to vip, served on every
// node at addr(node) and vip's port, and checks that several nodes served
// them, each seeing the LB's SNAT address snat as the client.
func checkVIPSpreads(t *testing.T, f *lab.Fabric, ns string, vip netip.AddrPort, snat netip.Addr, addr func(lab.Host) netip.Addr) {
	t.Helper()
	var servers []*echoServer
	for _, n := range f.Nodes() {
		servers = append(servers, listen(t, n.Namespace, netip.AddrPortFrom(addr(n), vip.Port())))
	}
	for i := range 12 {
		c, err := dial(ns, netip.AddrPort{}, vip, 2*time.Second)
		if err != nil {
			t.Fatalf("conn %d to %v: %v", i, vip, err)
		}
		if err := roundTrip(c, "hello", 2*time.Second); err != nil {
			t.Fatalf("conn %d to %v: %v", i, vip, err)
		}
		abort(c)
	}
	used := 0
	for _, s := range servers {
		if p := s.Peers(); len(p) > 0 {
			used++
			if p[0] != snat {
				t.Errorf("backend saw client %v, want the LB's SNAT address %v", p[0], snat)
			}
		}
	}
	if used < 2 {
		t.Errorf("12 connections to the VIP reached %d backends, want several", used)
	}
}

// checkLBForget holds a connection from ns to vip (served already), runs
// inject (an lb-forget fault), and checks that the connection goes silent
// while a new one works.
func checkLBForget(t *testing.T, ns string, vip netip.AddrPort, inject func()) {
	t.Helper()
	old, err := dial(ns, netip.AddrPort{}, vip, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer abort(old)
	if err := roundTrip(old, "before", 2*time.Second); err != nil {
		t.Fatalf("established conn to %v before the fault: %v", vip, err)
	}
	inject()
	if err := roundTrip(old, "after", time.Second); !isTimeout(err) {
		t.Errorf("established conn to %v after lb-forget: got %v, want a silent timeout", vip, err)
	}
	fresh, err := dial(ns, netip.AddrPort{}, vip, 2*time.Second)
	if err != nil {
		t.Fatalf("new conn to %v during lb-forget: %v", vip, err)
	}
	defer abort(fresh)
	if err := roundTrip(fresh, "new", 2*time.Second); err != nil {
		t.Errorf("new conn to %v during lb-forget: %v", vip, err)
	}
}

// deadFlows tries one connection and round trip per source port from
// src in ns to to, all at once, and returns the ports whose flow failed
// within 400 ms.
func deadFlows(ns string, src netip.Addr, to netip.AddrPort, ports []uint16) []uint16 {
	var mu sync.Mutex
	var dead []uint16
	var wg sync.WaitGroup
	for _, p := range ports {
		wg.Go(func() {
			c, err := dial(ns, netip.AddrPortFrom(src, p), to, 400*time.Millisecond)
			if err == nil {
				err = roundTrip(c, "x", 400*time.Millisecond)
				abort(c)
			}
			if err != nil {
				mu.Lock()
				dead = append(dead, p)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.Sort(dead)
	return dead
}
