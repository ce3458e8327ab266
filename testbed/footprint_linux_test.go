package testbed_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
	"github.com/netprober/prober/peers/peerstest"
	"github.com/netprober/prober/testbed"
)

var (
	footprint    = flag.Duration("footprint", 0, "run TestAgentFootprint and measure the agent this long after its warm-up (docs/performance.md, issue 14)")
	footprintEnv = flag.String("footprint.env", "", "comma-separated VAR=value pairs for the measured agent's environment, such as GOMAXPROCS=1")
	// Another rate tells the agent's cost per probe from its fixed cost.
	footprintCap    = flag.Float64("footprint.cap", 0, "probing.maxProbesPerSecond for both agents instead of deploy/'s")
	footprintProber = flag.String("footprint.prober", "", "a prober binary whose `prober agent` to run instead of a build of this checkout's prober-agent (an earlier commit's, for before and after)")
)

// footprintTargets is what an agent probes in a 5,000-node plan
// (plan.Plan: 125 racks of 40, docs/performance.md "Probe plan and
// series"), and how many agents probe it.
const footprintTargets = 164

// TestAgentFootprint measures the agent's resident memory and CPU at a
// 5,000-node plan (issue 14): a built prober-agent (the DaemonSets') in lab node n11
// probes 164 addresses of n21 with the probing block of
// deploy/daemonset.yaml's node.yaml (icmp, tcp_syn x 8 flows, http2_ping;
// interval 1s, window 60s, 200 probes/s), while a second agent in n21
// probes 164 addresses of n11 the same way, so that the measured agent
// also answers as many peers' PINGs and SYNs as a real one does. After a
// window's warm-up it reads VmRSS, VmHWM and utime+stime from /proc over
// -footprint and logs the line docs/performance.md quotes. The bounds it
// asserts are deploy/'s limits (256 MiB, 500 millicores), not the goal:
// the goal is a figure in the docs.
//
//	sudo go test ./testbed -run TestAgentFootprint -footprint 3m -v
func TestAgentFootprint(t *testing.T) {
	if *footprint <= 0 {
		t.Skip("measures for minutes: run with -footprint 3m (as root)")
	}
	f := labtest.Up(t, lab.Spec{Spines: 1, Racks: 2, NodesPerRack: 1, PodsPerNode: -1, Zones: 1})
	warmup := time.Minute
	ctx, cancel := context.WithTimeout(context.Background(), warmup+*footprint+2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	pr := testbed.Prober{Path: *footprintProber}
	if pr.Path == "" {
		pr.Agent = buildStatic(t, dir, "./cmd/prober-agent")["prober-agent"]
	}
	probing, err := testbed.DeployProbing(peerstest.RepoFile(t, "deploy/daemonset.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if *footprintCap > 0 {
		probing.MaxProbesPerSecond = *footprintCap
	}

	hosts := map[string]lab.Host{}
	addrs := map[string][]netip.Addr{}
	for _, name := range []string{"n11", "n21"} {
		h, ok := f.Host(name)
		if !ok {
			t.Fatalf("lab has no host %s", name)
		}
		hosts[name] = h
		if addrs[name], err = testbed.AddHostAddrs(f, name, footprintTargets); err != nil {
			t.Fatal(err)
		}
	}
	start := func(self, peer string) *testbed.Agent {
		t.Helper()
		// Each added address of the peer is a target of its own, as a
		// node of the plan would be.
		var targets []lab.Host
		for i, a := range addrs[peer] {
			h := hosts[peer]
			h.Name, h.Addr = fmt.Sprintf("%s-%03d", peer, i), a
			targets = append(targets, h)
		}
		c := testbed.AgentConfig(hosts[self], probing, targets...)
		// Every added address answers, as its own peer would: listen on
		// all of them, send from the node's own.
		c.Listen, c.Source = fmt.Sprintf("0.0.0.0:%d", testbed.AgentPort), hosts[self].Addr.String()
		pr := pr
		if self == "n11" && *footprintEnv != "" {
			pr.Env = strings.Split(*footprintEnv, ",")
		}
		a, err := testbed.StartAgent(ctx, f, testbed.AgentSpec{Prober: pr, Config: c, Dir: dir})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := a.Close(); err != nil {
				t.Errorf("agent %s: %v", self, err)
			}
		})
		return a
	}
	measured, peer := start("n11", "n21"), start("n21", "n11")
	for _, a := range []*testbed.Agent{measured, peer} {
		if err := a.WaitHealthy(ctx, 15*time.Second); err != nil {
			t.Fatal(err)
		}
	}

	t.Logf("warming up for %v (one window)", warmup)
	sleep(ctx, warmup)
	first, err := measured.Usage()
	if err != nil {
		t.Fatal(err)
	}
	began, maxRSS := time.Now(), first.RSS
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for time.Since(began) < *footprint {
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-tick.C:
		}
		u, err := measured.Usage()
		if err != nil {
			t.Fatal(err)
		}
		maxRSS = max(maxRSS, u.RSS)
		t.Logf("%3.0fs: RSS %.1f MiB (anon %.1f, file %.1f), CPU %.2fs", time.Since(began).Seconds(), mib(u.RSS), mib(u.Anon), mib(u.File), (u.CPU - first.CPU).Seconds())
	}
	last, err := measured.Usage()
	if err != nil {
		t.Fatal(err)
	}
	elapsed := time.Since(began)
	obs, err := measured.Observations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rate, lost, errs := footprintRate(t, obs)
	cpu := last.CPU - first.CPU
	millicores := 1000 * cpu.Seconds() / elapsed.Seconds()
	t.Logf("agent at a 5,000-node plan%s: %d targets (%v, %d tcp_syn flows), %.0f probes/s (%d lost, %d local errors in the window): "+
		"RSS %.1f MiB (anon %.1f, file %.1f; max %.1f, VmHWM %.1f), CPU %.2f s in %.0f s = %.1f millicores (%.2f%% of a core)",
		envNote(), len(obs.Targets), probing.Protocols, probing.Flows, rate, lost, errs,
		mib(last.RSS), mib(last.Anon), mib(last.File), mib(maxRSS), mib(last.PeakRSS), cpu.Seconds(), elapsed.Seconds(), millicores, millicores/10)
	// One line a script reads (issue 34).
	t.Logf("footprint: rss_mib=%.1f millicores=%.1f probes_per_second=%.0f", mib(last.RSS), millicores, rate)

	if len(obs.Targets) != footprintTargets {
		t.Errorf("observations have %d targets, want %d", len(obs.Targets), footprintTargets)
	}
	if want := 0.9 * probing.MaxProbesPerSecond; rate < want {
		t.Errorf("probe rate %.0f/s, want at least %.0f (90%% of maxProbesPerSecond): the agent probed less than it may", rate, want)
	}
	// deploy/daemonset.yaml's limits: past them a pod is killed or
	// throttled. The goals (docs/performance.md) are far below.
	if last.RSS > 256<<20 || millicores > 500 {
		t.Errorf("RSS %.1f MiB, CPU %.0f millicores: over deploy/'s limits of 256 MiB and 500m", mib(last.RSS), millicores)
	}
}

// footprintRate is the probe rate over the window of obs (probes sent,
// lost or answered, per second), and the probes lost and local errors in
// it. Every target must have been answered over every protocol.
func footprintRate(t *testing.T, obs api.Observations) (rate float64, lost, errs uint64) {
	t.Helper()
	var sent uint64
	for _, tg := range obs.Targets {
		// deploy/'s node protocols (dns is asked of DNS targets only),
		// and tcp_syn_mtu, its large probes, beside them.
		var got []string
		for _, p := range tg.Protocols {
			got = append(got, p.Protocol)
		}
		for _, want := range []string{"icmp", "tcp_syn", "http2_ping"} {
			if !slices.Contains(got, want) {
				t.Errorf("target %s: protocols %v probed, no %s", tg.Name, got, want)
			}
		}
		for _, p := range tg.Protocols {
			if p.Sent == 0 || p.Lost == p.Sent {
				t.Errorf("target %s %s: %d sent, %d lost in the window: want answers", tg.Name, p.Protocol, p.Sent, p.Lost)
			}
			sent += p.Sent
			lost += p.Lost
			errs += p.Errors
		}
	}
	return float64(sent+errs) / obs.WindowSeconds, lost, errs
}

// envNote names -footprint.env in the result line.
func envNote() string {
	if *footprintEnv == "" {
		return ""
	}
	return " (" + *footprintEnv + ")"
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// TestAddHostAddrs checks that every address AddHostAddrs adds answers
// from across the fabric, and that it refuses what it cannot number.
func TestAddHostAddrs(t *testing.T) {
	f := labtest.Up(t, lab.Spec{Spines: 1, Racks: 2, NodesPerRack: 1, PodsPerNode: -1, Zones: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n21, _ := f.Host("n21")
	addrs, err := testbed.AddHostAddrs(f, "n21", 3)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"198.19.2.32", "198.19.2.33", "198.19.2.34"}
	if fmt.Sprint(addrs) != fmt.Sprint(want) {
		t.Fatalf("added %v, want %v", addrs, want)
	}
	var ln net.Listener
	if err := lab.Do(n21.Namespace, func() (err error) { ln, err = net.Listen("tcp4", "0.0.0.0:0"); return err }); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	n11, _ := f.Host("n11")
	dial := lab.DialContext(n11.Namespace)
	for _, a := range addrs {
		c, err := dial(ctx, "tcp4", netip.AddrPortFrom(a, port).String())
		if err != nil {
			t.Errorf("dial %s from n11: %v", a, err)
			continue
		}
		c.Close()
	}
	for _, tc := range []struct {
		host string
		n    int
	}{{"n21", 0}, {"n21", 201}, {"spine1", 1}, {"n99", 1}} {
		if _, err := testbed.AddHostAddrs(f, tc.host, tc.n); err == nil {
			t.Errorf("AddHostAddrs(%s, %d): no error", tc.host, tc.n)
		}
	}
}
