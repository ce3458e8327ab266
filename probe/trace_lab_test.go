//go:build linux

package probe_test

import (
	"context"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
	"github.com/netprober/prober/probe"
)

// traceLab is a leaf-spine of 3 spines and 2 racks of one node each: the
// tracer runs in n11 towards n21, where a listener answers SYN-ACKs.
type traceLab struct {
	f      *lab.Fabric
	src    lab.Host
	dst    lab.Host
	target probe.Target
}

const traceLabPort = 9808

func upTraceLab(t *testing.T) *traceLab {
	t.Helper()
	f := labtest.Up(t, lab.Spec{Spines: 3, Racks: 2, NodesPerRack: 1, PodsPerNode: -1})
	src, _ := f.Host("n11")
	dst, _ := f.Host("n21")
	var ln net.Listener
	if err := lab.Do(dst.Namespace, func() (err error) {
		ln, err = net.Listen("tcp4", netip.AddrPortFrom(dst.Addr, traceLabPort).String())
		return err
	}); err != nil {
		t.Fatalf("listen in %s: %v", dst.Namespace, err)
	}
	t.Cleanup(func() { ln.Close() })
	return &traceLab{f: f, src: src, dst: dst, target: probe.Target{Addr: dst.Addr, Port: traceLabPort}}
}

// routerSysctl sets a sysctl in every router of the lab.
func (l *traceLab) routerSysctl(t *testing.T, key, value string) {
	t.Helper()
	for _, r := range l.f.Routers {
		if err := lab.SetSysctl(r.Namespace, key, value); err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
	}
}

// tracer starts a standalone tracer inside the source host's namespace.
func (l *traceLab) tracer(t *testing.T, base uint16, flows int) (*probe.Tracer, []uint16) {
	t.Helper()
	var tr *probe.Tracer
	if err := lab.Do(l.src.Namespace, func() (err error) {
		tr, err = probe.NewStandaloneTracer(probe.StandaloneConfig{Source: l.src.Addr, PortBase: base, Flows: flows})
		return err
	}); err != nil {
		t.Fatalf("tracer in %s: %v", l.src.Namespace, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tr.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("tracer Run: %v", err)
		}
	})
	ports, err := tr.Ports(flows)
	if err != nil {
		t.Fatal(err)
	}
	return tr, ports
}

// spineCounters counts, in every spine, the forwarded TCP segments of
// each source port: the ground truth of which spine ECMP gave each flow.
func spineCounters(t *testing.T, f *lab.Fabric, sports []uint16) func() map[uint16]string {
	t.Helper()
	var reads []func() map[uint16]uint64
	var names []string
	for _, r := range f.Routers {
		if r.Kind != lab.KindSpine {
			continue
		}
		reads = append(reads, labtest.SourcePortCounters(t, r.Namespace, sports))
		names = append(names, r.Name)
	}
	return func() map[uint16]string {
		got := map[uint16]string{}
		for i, read := range reads {
			for port, n := range read() {
				if n > 0 {
					if prev, ok := got[port]; ok && prev != names[i] {
						t.Errorf("source port %d crossed both %s and %s", port, prev, names[i])
					}
					got[port] = names[i]
				}
			}
		}
		return got
	}
}

// spineSeen returns the spine a flow's trace shows at hop 2, heard or
// inferred, or "".
func spineSeen(ft probe.FlowTrace, hops map[string]string) string {
	if len(ft.Hops) >= 2 && ft.Hops[1].Addr.IsValid() {
		return hops[ft.Hops[1].Addr.String()]
	}
	return ""
}

// TestTraceFindsEverySpine traces 16 flows under Linux's default ICMP
// rate limit, with the routers hashing ECMP as the lab does (policy 3 on
// the 5-tuple) and with the kernel's own L4 policy (1), which hashes a
// raw-socket probe's 5-tuple alike: every flow's spine must be the one
// the spines' counters saw it cross, and all three must be found.
func TestTraceFindsEverySpine(t *testing.T) {
	for _, policy := range []string{"3", "1"} {
		t.Run("fib_multipath_hash_policy="+policy, func(t *testing.T) {
			l := upTraceLab(t)
			l.routerSysctl(t, "net.ipv4.fib_multipath_hash_policy", policy)
			for _, r := range l.f.Routers {
				if got, err := lab.Sysctl(r.Namespace, "net.ipv4.fib_multipath_hash_policy"); err != nil || got != policy {
					t.Fatalf("%s: fib_multipath_hash_policy %q (%v), want %s", r.Name, got, err, policy)
				}
			}
			traceEverySpine(t, l)
		})
	}
}

func traceEverySpine(t *testing.T, l *traceLab) {
	tr, ports := l.tracer(t, 62000, 16)
	truth := spineCounters(t, l.f, ports)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	fts, err := tr.Trace(ctx, l.target, ports, probe.TraceConfig{Probes: 3, MaxTTL: 8, Retries: 8})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("16 flows traced in %v", time.Since(start).Round(time.Millisecond))
	want := truth()
	hops := l.f.Hops()
	spines := map[string]bool{}
	for _, ft := range fts {
		t.Logf("sport %d: %v reached=%v e2e %d/%d inferred %v", ft.SourcePort, ft.Path(), ft.Reached, ft.Received, ft.Sent, inferredTTLs(ft))
		if !ft.Reached || len(ft.Hops) != 4 || ft.Hops[3].Addr != l.dst.Addr {
			t.Errorf("sport %d: path %v reached %v, want 4 hops ending at %v", ft.SourcePort, ft.Path(), ft.Reached, l.dst.Addr)
			continue
		}
		// Every spine hop is known, heard or inferred, and right.
		got := spineSeen(ft, hops)
		if got != want[ft.SourcePort] {
			t.Errorf("sport %d: trace shows spine %q, the flow crossed %s", ft.SourcePort, got, want[ft.SourcePort])
		}
		if got != "" {
			spines[got] = true
		}
		if lr := ft.Loss(probe.DefaultNoise); lr.Lossy {
			t.Errorf("sport %d: lossy (%+v) in a healthy fabric", ft.SourcePort, lr)
		}
	}
	if len(spines) != 3 {
		t.Errorf("traces found spines %v, want all 3", slices.Sorted(func(yield func(string) bool) {
			for s := range spines {
				if !yield(s) {
					return
				}
			}
		}))
	}
}

// TestTraceLossySpine drops half of what spine2 forwards towards the
// destination's rack: the flows through spine2, and only they, must read
// lossy, with spine2 as the suspect hop. (Loss in both directions would
// also hit flows whose answers return through spine2, which a forward
// trace cannot see: docs/trace.md.)
// The routers' ICMP rate limit is turned off here, so that the spine's own
// answers measure reachability; TestTraceFindsEverySpine keeps it on and
// checks that rate-limited silence is never read as loss.
func TestTraceLossySpine(t *testing.T) {
	l := upTraceLab(t)
	l.routerSysctl(t, "net.ipv4.icmp_ratelimit", "0")
	tr, ports := l.tracer(t, 62100, 16)
	truth := spineCounters(t, l.f, ports)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Map the flows first: the fault drops traces' probes too.
	if _, err := tr.Trace(ctx, l.target, ports, probe.TraceConfig{Probes: 1, MaxTTL: 8}); err != nil {
		t.Fatal(err)
	}
	via := truth()
	if err := l.f.Inject(ctx, lab.Fault{Kind: lab.FaultLinkLoss, From: "spine2", To: "tor2", Permille: 500}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// 24 probes a flow: with 12, a flow through spine2 once read 1 lost
	// of 12 in CI, and every such flow must read lossy.
	fts, err := tr.Trace(ctx, l.target, ports, probe.TraceConfig{Probes: 24, MaxTTL: 8, Rate: 2000})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("16 flows x 24 probes traced in %v", time.Since(start).Round(time.Millisecond))
	hops := l.f.Hops()
	nLossy := 0
	for _, ft := range fts {
		lr := ft.Loss(probe.DefaultNoise)
		suspect := ""
		if lr.SuspectHop >= 0 {
			suspect = hops[ft.Hops[lr.SuspectHop].Addr.String()]
		}
		t.Logf("sport %d via %s: %v e2e %d/%d lossy %v suspect %q", ft.SourcePort, via[ft.SourcePort], ft.Path(), ft.Received, ft.Sent, lr.Lossy, suspect)
		if via[ft.SourcePort] == "spine2" {
			nLossy++
			if !lr.Lossy || suspect != "spine2" {
				t.Errorf("sport %d through spine2: lossy %v suspect %q, want lossy with suspect spine2", ft.SourcePort, lr.Lossy, suspect)
			}
		} else if lr.Lossy {
			t.Errorf("sport %d through %s: read lossy (%+v)", ft.SourcePort, via[ft.SourcePort], lr)
		}
	}
	if nLossy == 0 {
		t.Fatal("no flow crossed spine2")
	}
}

// TestTraceSideBySide maps 32 flows with the tracer and with a loop of
// Debian's traceroute -T --sport (seed 004's method), checks both against
// the spines' counters, and logs the times (docs/performance.md). The
// tracer runs under Linux's default ICMP rate limit in every router,
// where it must infer many spine hops from the far ToR's answers. The
// loop waits up to 5 s for every rate-limited hop and takes a minute and
// a half under that limit, so by default it runs with the limit off,
// checking the paths only; PROBER_TRACE_LOOP=1 runs it under the limit
// too and logs the speed-up.
func TestTraceSideBySide(t *testing.T) {
	if _, err := exec.LookPath("traceroute"); err != nil {
		t.Skip("traceroute not installed (apt-get install traceroute; hack/deps.sh does it)")
	}
	slowLoop := os.Getenv("PROBER_TRACE_LOOP") == "1"
	l := upTraceLab(t)
	tr, ports := l.tracer(t, 62200, 32)
	truth := spineCounters(t, l.f, ports)
	hops := l.f.Hops()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	start := time.Now()
	fts, err := tr.Trace(ctx, l.target, ports, probe.TraceConfig{Probes: 1, Retries: 8})
	if err != nil {
		t.Fatal(err)
	}
	proberTook := time.Since(start)
	via := truth()
	proberRight, inferred := 0, 0
	for _, ft := range fts {
		if len(ft.Hops) == 4 && ft.Reached && spineSeen(ft, hops) == via[ft.SourcePort] {
			proberRight++
		}
		if len(ft.Hops) > 1 && ft.Hops[1].Inferred {
			inferred++
		}
	}
	perSpine := map[string]int{}
	for _, s := range via {
		perSpine[s]++
	}
	t.Logf("prober: 32 flows (per spine %v) in %v, %d paths right, %d spine hops inferred", perSpine, proberTook.Round(time.Millisecond), proberRight, inferred)
	if proberRight != 32 {
		t.Errorf("prober: %d paths right, want 32", proberRight)
	}
	// Detection time is a feature: a tracer that waited for every
	// spine's answer would take 7 s here (13 flows cross one spine,
	// which answers 6 at once and then one a second), the loop 90 s.
	if proberTook > 15*time.Second {
		t.Errorf("prober took %v to map 32 flows, want well under 15s", proberTook)
	}

	// traceroute binds the same source ports, so the tracer lets them go.
	tr.Close()
	if slowLoop {
		time.Sleep(6 * time.Second) // the routers' ICMP budget refills
	} else {
		l.routerSysctl(t, "net.ipv4.icmp_ratelimit", "0")
	}
	start = time.Now()
	trRight := 0
	for _, sport := range ports {
		cmd, err := l.f.Command(ctx, l.src.Name, "traceroute", "-T", "-n", "--sport="+strconv.Itoa(int(sport)), "-p", strconv.Itoa(traceLabPort), l.dst.Addr.String())
		if err != nil {
			t.Fatal(err)
		}
		var out strings.Builder
		cmd.Stdout = &out
		if err := lab.Start(cmd); err != nil {
			t.Fatal(err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("traceroute --sport=%d: %v\n%s", sport, err, out.String())
		}
		for line := range strings.Lines(out.String()) {
			if f := strings.Fields(line); len(f) > 1 && f[0] == "2" && hops[f[1]] == via[sport] {
				trRight++
			}
		}
	}
	trTook := time.Since(start)
	limit := "off"
	if slowLoop {
		limit = "default"
	}
	t.Logf("traceroute loop (ICMP limit %s): 32 flows in %v, %d paths right", limit, trTook.Round(time.Millisecond), trRight)
	if slowLoop {
		t.Logf("same limit: prober %.1fx faster than the loop", trTook.Seconds()/proberTook.Seconds())
	}
	if trRight != 32 {
		t.Errorf("traceroute: %d paths right, want 32", trRight)
	}
}

func inferredTTLs(ft probe.FlowTrace) []int {
	var out []int
	for _, h := range ft.Hops {
		if h.Inferred {
			out = append(out, h.TTL)
		}
	}
	return out
}
