package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/lab"
	"github.com/netprober/prober/lab/labtest"
	"github.com/netprober/prober/probe"
	"github.com/netprober/prober/testbed"
)

// TestNamespaceLoss is issue 2's end-to-end test, through testbed like
// `make demo`: two hosts joined by routers in network namespaces, the real
// agent on each probing the other, then random loss injected on one link
// with an nftables numgen rule. Each agent must measure what was injected.
func TestNamespaceLoss(t *testing.T) {
	labtest.NeedNetAdmin(t)
	const permille = 200
	var out strings.Builder
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := pairDemo(ctx, pairDemoOptions{
		prober: testProber(), prefix: labtest.Prefix(t), permille: permille, window: 6 * time.Second,
		out: io.MultiWriter(&out, testWriter{t, &strings.Builder{}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	// 6 s at 10 ms, a lost probe holding its flow for the 50 ms timeout:
	// ~330 icmp and ~1,300 tcp_syn probes per direction under 20% loss.
	// 12-28% is then 3.6 standard deviations each side for icmp (sd 2.2%)
	// and over 7 for tcp_syn.
	for _, agent := range []string{"n11", "n21"} {
		for _, proto := range []string{"icmp", "tcp_syn"} {
			key := agent + "/" + proto
			h, ok := res.healthy[key]
			if !ok {
				t.Fatalf("healthy: no %s measurement", key)
			}
			if h.Sent < 200 || h.Lost != 0 {
				t.Errorf("healthy %s: sent %d lost %d, want >= 200 sent and 0 lost", key, h.Sent, h.Lost)
			}
			f := res.faulty[key]
			if f.Sent < 200 || f.LossRatio < 0.12 || f.LossRatio > 0.28 {
				t.Errorf("20%% loss %s: sent %d lost %d = %.1f%%, want 12-28%%", key, f.Sent, f.Lost, 100*f.LossRatio)
			}
			if proto == "tcp_syn" {
				if len(f.Flows) != 4 {
					t.Fatalf("%s: %d flows, want 4", key, len(f.Flows))
				}
				for _, fl := range f.Flows {
					if fl.Lost == 0 {
						t.Errorf("%s flow %d saw no loss under 20%% random loss", key, fl.SourcePort)
					}
				}
			}
		}
	}
	for _, want := range []string{"building the fabric", "injecting 20% random loss", "cleaning up"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q", want)
		}
	}
}

// testProber is this test binary acting as prober (see TestMain).
func testProber() testbed.Prober {
	return testbed.Prober{Path: os.Args[0], Env: []string{"PROBER_TEST_AS_MAIN=1"}}
}

// pairDemo is issue 2's two-namespace loss demo: two nodes in two racks
// joined through a spine, an agent on each, a healthy window, then random
// loss on one link, and what the agents measured.
type pairDemoOptions struct {
	prober   testbed.Prober
	prefix   string
	permille int
	window   time.Duration
	out      io.Writer
}

// pairMeasure is what one agent measured towards its peer, by protocol.
type pairMeasure map[string]api.Protocol // "n11/tcp_syn"

type pairDemoResult struct{ healthy, faulty pairMeasure }

// pairDemo builds the fabric, runs the agents through a healthy and a
// faulty phase and returns both measurements. Everything it creates is
// removed before it returns, also on error or cancellation.
func pairDemo(ctx context.Context, o pairDemoOptions) (res pairDemoResult, err error) {
	step := func(format string, args ...any) { fmt.Fprintf(o.out, "==> "+format+"\n", args...) }
	spec := lab.Spec{Prefix: o.prefix, Spines: 1, Racks: 2, NodesPerRack: 1, PodsPerNode: -1, Zones: 1}
	spec.SetDefaults()
	step("building the fabric: n11 - tor1 - spine1 - tor2 - n21 (namespaces %s-*)", o.prefix)
	if err := lab.Down(o.prefix); err != nil { // leftovers of a crashed run
		return res, fmt.Errorf("removing an earlier lab: %w", err)
	}
	f, err := lab.Up(ctx, spec, slog.New(slog.DiscardHandler))
	if err != nil {
		return res, err
	}
	defer func() {
		step("cleaning up")
		err = errors.Join(err, lab.Down(o.prefix))
	}()
	dir, err := os.MkdirTemp("", "prober-demo-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)

	nodes := f.Nodes()
	if len(nodes) != 2 {
		return res, fmt.Errorf("want 2 nodes, the fabric has %d", len(nodes))
	}
	var agents []*testbed.Agent
	defer func() {
		for _, a := range agents {
			a.Close()
		}
	}()
	// A lost probe holds its flow until the timeout, so a short one keeps
	// the sample count up under loss; the lab's RTT is about 100 µs.
	probing := config.Probing{
		Interval: config.Duration(10 * time.Millisecond), Timeout: config.Duration(50 * time.Millisecond),
		Window: config.Duration(o.window), Flows: 4, Protocols: []probe.Protocol{probe.ProtocolICMP, probe.ProtocolTCPSYN},
		MaxProbesPerSecond: 2000, MaxTargets: 4,
	}
	for i, n := range nodes {
		peer := nodes[1-i]
		a, err := testbed.StartAgent(ctx, f, testbed.AgentSpec{Prober: o.prober, Config: testbed.AgentConfig(n, probing, peer), Dir: dir})
		if err != nil {
			return res, err
		}
		agents = append(agents, a)
		step("agent %s started on %s, probing %s (%s) over icmp and 4 tcp_syn flows", n.Name, n.Addr, peer.Name, peer.Addr)
	}
	for _, a := range agents {
		if err := a.WaitHealthy(ctx, 10*time.Second); err != nil {
			return res, err
		}
	}

	// window waits for the agents' windows to fill, then reads and prints
	// what they measured.
	window := func(what string) (pairMeasure, error) {
		step("%s for one window (%s)", what, o.window)
		if err := testbed.WaitProgress(ctx, o.out, o.window+o.window/10); err != nil {
			return nil, err
		}
		m, err := measure(ctx, agents)
		if err == nil {
			printMeasure(o.out, m)
		}
		return m, err
	}
	if res.healthy, err = window("healthy fabric: measuring"); err != nil {
		return res, err
	}

	fault := lab.Fault{Kind: lab.FaultLinkLoss, From: "spine1", To: "tor2", Permille: o.permille}
	step("injecting %d%% random loss on the spine1 -> tor2 link (nftables numgen in %s-spine1)", o.permille/10, o.prefix)
	if err := f.Inject(ctx, fault); err != nil {
		return res, err
	}
	if res.faulty, err = window("measuring"); err != nil {
		return res, err
	}
	fmt.Fprintf(o.out, "    n11 -> n21 loses its requests on the link, n21 -> n11 its replies: both see about %d%%.\n", o.permille/10)
	return res, f.Clear(ctx)
}

func measure(ctx context.Context, agents []*testbed.Agent) (pairMeasure, error) {
	m := pairMeasure{}
	for _, a := range agents {
		obs, err := a.Observations(ctx)
		if err != nil {
			return nil, err
		}
		for _, t := range obs.Targets {
			for _, p := range t.Protocols {
				m[a.Name()+"/"+p.Protocol] = p
			}
		}
	}
	return m, nil
}

func printMeasure(w io.Writer, m pairMeasure) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "    agent\tprotocol\tsent\tlost\tloss\trtt p50\tflows' loss\t")
	for _, k := range slices.Sorted(maps.Keys(m)) {
		p := m[k]
		agent, proto, _ := strings.Cut(k, "/")
		var flows []string
		for _, f := range p.Flows {
			flows = append(flows, fmt.Sprintf("%.0f%%", 100*f.LossRatio))
		}
		fmt.Fprintf(tw, "    %s\t%s\t%d\t%d\t%.1f%%\t%s\t%s\t\n", agent, proto, p.Sent, p.Lost, 100*p.LossRatio,
			time.Duration(p.RTTP50*float64(time.Second)).Round(time.Microsecond), strings.Join(flows, " "))
	}
	tw.Flush()
}

// testWriter logs whole lines, leaving out progress bars.
type testWriter struct {
	t   *testing.T
	buf *strings.Builder
}

func (w testWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	for {
		s := w.buf.String()
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			return len(b), nil
		}
		if line := s[:i]; !strings.Contains(line, "\r") {
			w.t.Log(line)
		}
		w.buf.Reset()
		w.buf.WriteString(s[i+1:])
	}
}
