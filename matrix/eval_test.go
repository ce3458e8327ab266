package matrix_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

var evalFull = flag.Bool("eval", false, "run the full localization evaluation (many trials) and print its table")

var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// evalFabric is the fabric the quality tests use: 512 nodes, so that each
// ToR-spine link carries ~4,000 probes a window, as at 5,000 nodes.
var evalFabric = matrixsim.Config{
	Racks: 32, NodesPerRack: 16, Spines: 4, LB: true,
	FlowsPerTarget: 4, ProbesPerFlow: 8,
	SilentHop: 0.05, Background: 1e-4,
}

// localize runs one round over the fabric's reports under ft; lost, when
// set, says which reports never arrive.
func localize(t testing.TB, fab *matrixsim.Fabric, ft matrixsim.Fault, seed uint64, lost func() bool) matrix.Diagnosis {
	m, err := matrix.New(matrix.Config{GroupBy: "rack", Hops: fab.Hops()})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range fab.Observations(ft, seed) {
		if lost != nil && lost() {
			continue
		}
		if err := m.Observe(t0, o); err != nil {
			t.Fatal(err)
		}
	}
	return m.Localize(t0)
}

// score counts the top suspect (named: trials with one; right: it is the
// truth) and the whole list (listed: suspects of score >= 0.1 over every
// trial; listedRight: of them, the truth), as operators read it.
type score struct{ trials, named, right, listed, listedRight int }

// listPrecision is the share of listed suspects (score >= 0.1) that are
// the truth (issue 16); 1 when none was listed.
func (s score) listPrecision() float64 {
	if s.listed == 0 {
		return 1
	}
	return float64(s.listedRight) / float64(s.listed)
}

func (s score) precision() float64 {
	if s.named == 0 {
		return 1
	}
	return float64(s.right) / float64(s.named)
}
func (s score) recall() float64 { return float64(s.right) / float64(s.trials) }

func evaluate(t testing.TB, cfg matrixsim.Config, k matrixsim.Kind, loss float64, trials int, seed uint64) score {
	fab, err := matrixsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, uint64(len(k))))
	var s score
	for i := range trials {
		ft := fab.Random(k, loss, rng)
		d := localize(t, fab, ft, seed*1000+uint64(i), nil)
		s.trials++
		if len(d.Suspects) == 0 {
			continue
		}
		s.named++
		kind, name := fab.Truth(ft)
		for _, sp := range d.Listed() {
			s.listed++
			if sp.Kind == kind && sp.Name == name {
				s.listedRight++
			}
		}
		top := d.Suspects[0]
		if top.Kind == kind && top.Name == name {
			s.right++
		} else if testing.Verbose() {
			t.Logf("%s %.3g trial %d: truth %s/%s, top %s/%s score %.2f (of %d suspects)", k, loss, i, kind, name, top.Kind, top.Name, top.Score, len(d.Suspects))
		}
	}
	return s
}

// qualityCases are the fault classes and loss rates evaluated, with the
// goals they are held to (issue 5): precision and recall >= 0.95 at 2-5 %
// link or device loss, recall >= 0.90 at 1 %. Cases with goal 0 are
// measured, not asserted.
var qualityCases = []struct {
	kind             matrixsim.Kind
	loss             float64
	minPrec, minRecl float64
}{
	{matrixsim.LinkLoss, 0.05, 0.95, 0.95},
	{matrixsim.LinkLoss, 0.02, 0.95, 0.95},
	{matrixsim.LinkLoss, 0.01, 0.95, 0.9},
	{matrixsim.LinkLoss, 0.005, 0, 0},
	{matrixsim.SpineLoss, 0.05, 0.95, 0.95},
	{matrixsim.SpineLoss, 0.02, 0.95, 0.95},
	{matrixsim.SpineLoss, 0.01, 0.95, 0.9},
	{matrixsim.ToRLoss, 0.05, 0.95, 0.95},
	{matrixsim.ToRLoss, 0.02, 0.95, 0.95},
	{matrixsim.ToRLoss, 0.01, 0.95, 0.9},
	{matrixsim.Blackhole, 1, 0.95, 0.95},
	{matrixsim.LBLoss, 0.02, 0.95, 0.95},
	{matrixsim.LBEstablished, 1, 0.95, 0.95},
	{matrixsim.HostNIC, 0.02, 0.95, 0.95},
	{matrixsim.HostNIC, 0.01, 0, 0},
}

// TestLocalizeQuality holds the top suspect's precision and recall to the
// goals over seeded trials on evalFabric: 4 trials per case by default,
// 50 with -eval (which also logs the table for docs/performance.md).
func TestLocalizeQuality(t *testing.T) {
	if testing.Short() {
		t.Skip("quality evaluation skipped in -short")
	}
	trials := 4
	if *evalFull {
		trials = 50
	}
	for _, tc := range qualityCases {
		t.Run(fmt.Sprintf("%s/%g", tc.kind, tc.loss), func(t *testing.T) {
			t.Parallel()
			s := evaluate(t, evalFabric, tc.kind, tc.loss, trials, 1)
			if *evalFull {
				t.Logf("| %s | %g | %d | %.2f | %.2f | %.2f (%d of %d) |", tc.kind, tc.loss, s.trials, s.precision(), s.recall(),
					s.listPrecision(), s.listedRight, s.listed)
			}
			if s.precision() < tc.minPrec || s.recall() < tc.minRecl {
				t.Errorf("%s at %g: precision %.2f recall %.2f over %d trials, want >= %.2f and >= %.2f",
					tc.kind, tc.loss, s.precision(), s.recall(), s.trials, tc.minPrec, tc.minRecl)
			}
		})
	}
	t.Run("healthy", func(t *testing.T) {
		t.Parallel()
		fab, _ := matrixsim.New(evalFabric)
		named := 0
		for i := range trials {
			if d := localize(t, fab, matrixsim.Fault{Kind: matrixsim.Healthy}, uint64(100+i), nil); len(d.Suspects) > 0 {
				named++
				t.Errorf("healthy trial %d: suspects %+v", i, d.Suspects[0])
			}
		}
		if *evalFull {
			t.Logf("| healthy | 1e-4 background | %d | runs with any suspect: %d |", trials, named)
		}
	})
}

// BenchmarkLocalize5000 is one round at 5,000 nodes (125 racks of 40, 8
// spines, an LB; 4 traced flows per target): Observe of every report,
// then Localize. Reported per round. The dual-stack cases have every
// agent report both families, the fault in both; spine_delay, a spine
// adding 20 ms, has 4 probes a flow.
func BenchmarkLocalize5000(b *testing.B) {
	for _, c := range []struct {
		kind matrixsim.Kind
		dual bool
	}{{matrixsim.Healthy, false}, {matrixsim.LinkLoss, false}, {matrixsim.Blackhole, false}, {matrixsim.SpineDelay, false},
		{matrixsim.Healthy, true}, {matrixsim.LinkLoss, true}} {
		k, name := c.kind, string(c.kind)
		if c.dual {
			name = "dual-stack/" + name
		}
		b.Run(name, func(b *testing.B) {
			cfg := matrixsim.Config{Racks: 125, NodesPerRack: 40, Spines: 8, LB: true,
				FlowsPerTarget: 4, ProbesPerFlow: 2, SilentHop: 0.05, Background: 1e-4}
			if k == matrixsim.SpineDelay {
				cfg.ProbesPerFlow = 4 // a flow's median needs three answers
			}
			fab, err := matrixsim.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ft := matrixsim.Fault{Kind: k, Loss: 0.02, Delay: 0.02, Rack: 7, Spine: 3}
			obs, hops := fab.Observations(ft, 1), fab.Hops()
			if c.dual {
				obs, hops = dualStack(obs, fab.Observations(ft, 2)), hops6(fab)
			}
			m, _ := matrix.New(matrix.Config{GroupBy: "rack", Hops: hops})
			for _, o := range obs {
				if err := m.Observe(t0, o); err != nil {
					b.Fatal(err)
				}
			}
			m.Localize(t0) // warm the reused storage
			b.ReportAllocs()
			var d matrix.Diagnosis
			for b.Loop() {
				for _, o := range obs {
					m.Observe(t0, o)
				}
				d = m.Localize(t0)
			}
			if k != matrixsim.Healthy {
				kind, name := fab.Truth(ft)
				if len(d.Suspects) == 0 || d.Suspects[0].Kind != kind || d.Suspects[0].Name != name {
					b.Errorf("top suspect %+v, want %s/%s", d.Suspects, kind, name)
				}
			} else if len(d.Suspects) != 0 {
				b.Errorf("healthy: suspects %+v", d.Suspects)
			}
		})
	}
}

// listRow is one row of the whole-list evaluation (issue 16): a fault (or
// two) on a fabric, and what real fabrics add to it.
type listRow struct {
	name string
	cfg  matrixsim.Config
	kind matrixsim.Kind
	loss float64
	// two adds a second fault of the same kind at another place.
	two bool
	// duty is the share of the window a flapping fault is on: its loss
	// is spread over the window's probes (0: always on).
	duty float64
	// missing is the share of agents whose reports never arrive.
	missing float64
	// Goals: precision over every listed suspect, recall of every fault
	// (all of them listed). 0: measured, not asserted.
	minPrec, minRecall float64
}

var (
	bigFabric = matrixsim.Config{Racks: 64, NodesPerRack: 8, Spines: 8, LB: true,
		FlowsPerTarget: 4, ProbesPerFlow: 8, SilentHop: 0.01, Background: 1e-4}
	unlabelled = func() matrixsim.Config { c := evalFabric; c.NoRackLabels = true; return c }()
	// perProbe is evalFabric with every probe's reply on a spine of its
	// own, as IPv6 pods' SYN-ACKs in a fabric that hashes flow labels.
	perProbe = func() matrixsim.Config { c := evalFabric; c.ReplyPerProbe = true; return c }()
	// podFabric runs a prober pod on every node, as the pod DaemonSet
	// does: the rules comparing a node's pod paths with its node paths,
	// and a pod with its rack-mates, face ECMP's chance too.
	podFabric = matrixsim.Config{Racks: 16, NodesPerRack: 8, Spines: 4, LB: true, Pods: true,
		FlowsPerTarget: 4, ProbesPerFlow: 8, SilentHop: 0.05, Background: 1e-4}
	perProbePods = func() matrixsim.Config { c := podFabric; c.ReplyPerProbe = true; return c }()
	// silentFabric is podFabric whose routers never answer a trace (a
	// cloud VPC) and whose nodes carry no rack label: the tier stage
	// alone names what can be known (matrixsim's Truth).
	silentFabric = func() matrixsim.Config { c := podFabric; c.SilentRouters, c.NoRackLabels = true, true; return c }()
	// silentL2 is silentFabric with racks switched at L2, as the lab's:
	// a trace to a rack-mate shows the rack-mate alone.
	silentL2 = func() matrixsim.Config { c := silentFabric; c.L2Racks = true; return c }()
	// overlayFabric carries pods' flows to other nodes' pods over VXLAN:
	// their traces see the nodes, never the underlay their packets take.
	overlayFabric = func() matrixsim.Config { c := podFabric; c.Overlay = true; return c }()
	// silentOverlay is both: a cloud VPC under an overlay CNI.
	silentOverlay = func() matrixsim.Config { c := silentFabric; c.Overlay = true; return c }()
	// labShape is the scenario suite's fabric (3 racks of 3 nodes, 3
	// spines, a pod per node, an LB, Linux's ICMP rate limit silencing a
	// fifth of the hops), routed and on an overlay: few flows cross each
	// spine, so a 1% fault there is near what the data can tell.
	labShape        = matrixsim.Config{Racks: 3, NodesPerRack: 3, Spines: 3, LB: true, Pods: true, FlowsPerTarget: 4, ProbesPerFlow: 30, SilentHop: 0.2, Background: 1e-4}
	labShapeOverlay = func() matrixsim.Config { c := labShape; c.Overlay = true; return c }()
	// threeTier is a three-tier Clos: 4 fabric pods of 2 racks x 8
	// nodes, 2 aggregation switches a pod, 2 super-spines, an LB on them.
	threeTier = matrixsim.Config{Racks: 8, NodesPerRack: 8, Spines: 2, SuperSpines: 2, RacksPerPod: 2, LB: true,
		FlowsPerTarget: 4, ProbesPerFlow: 16, SilentHop: 0.05, Background: 1e-4}
	threeTierOverlay = func() matrixsim.Config { c := threeTier; c.Pods, c.Overlay = true, true; return c }()
	// large sends probing.pmtu's large probes, one in 8 (on evalFabric
	// and podFabric a single one a flow: a large plan's rate).
	large           = func(c matrixsim.Config) matrixsim.Config { c.LargeEvery = 8; return c }
	threeTierSilent = func() matrixsim.Config {
		c := threeTier
		c.Pods, c.SilentRouters, c.NoRackLabels = true, true, true
		return c
	}()
)

var listRows = []listRow{
	{name: "link 5%", cfg: evalFabric, kind: matrixsim.LinkLoss, loss: 0.05, minPrec: 0.98, minRecall: 0.95},
	{name: "link 1%", cfg: evalFabric, kind: matrixsim.LinkLoss, loss: 0.01, minPrec: 0.98, minRecall: 0.95},
	{name: "link 0.5%", cfg: evalFabric, kind: matrixsim.LinkLoss, loss: 0.005, minPrec: 0.98, minRecall: 0.9},
	{name: "spine 1%", cfg: evalFabric, kind: matrixsim.SpineLoss, loss: 0.01, minPrec: 0.98, minRecall: 0.95},
	{name: "tor 1%", cfg: evalFabric, kind: matrixsim.ToRLoss, loss: 0.01, minPrec: 0.98, minRecall: 0.95},
	{name: "host 2%", cfg: evalFabric, kind: matrixsim.HostNIC, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "two links 2%", cfg: evalFabric, kind: matrixsim.LinkLoss, loss: 0.02, two: true, minPrec: 0.98, minRecall: 0.95},
	{name: "two spines 2%", cfg: evalFabric, kind: matrixsim.SpineLoss, loss: 0.02, two: true, minPrec: 0.98, minRecall: 0.95},
	{name: "flapping link 2% (half the window)", cfg: evalFabric, kind: matrixsim.LinkLoss, loss: 0.02, duty: 0.5, minPrec: 0.98, minRecall: 0.95},
	{name: "8 spines, 64 racks, 1% silent: link 2%", cfg: bigFabric, kind: matrixsim.LinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "8 spines, 64 racks, 1% silent: spine 1%", cfg: bigFabric, kind: matrixsim.SpineLoss, loss: 0.01, minPrec: 0.98, minRecall: 0.95},
	{name: "10% of agents missing: link 2%", cfg: evalFabric, kind: matrixsim.LinkLoss, loss: 0.02, missing: 0.1, minPrec: 0.98, minRecall: 0.95},
	{name: "10% of agents missing: tor 2%", cfg: evalFabric, kind: matrixsim.ToRLoss, loss: 0.02, missing: 0.1, minPrec: 0.98, minRecall: 0.95},
	{name: "racks inferred: link 2%", cfg: unlabelled, kind: matrixsim.LinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "racks inferred: tor 2%", cfg: unlabelled, kind: matrixsim.ToRLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "pods: link 5%", cfg: podFabric, kind: matrixsim.LinkLoss, loss: 0.05, minPrec: 0.98, minRecall: 0.95},
	{name: "pods: link 2%", cfg: podFabric, kind: matrixsim.LinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "pods: spine 2%", cfg: podFabric, kind: matrixsim.SpineLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "pods: dataplane 5%", cfg: podFabric, kind: matrixsim.Dataplane, loss: 0.05, minPrec: 0.98, minRecall: 0.95},
	{name: "pods: dataplane 2%", cfg: podFabric, kind: matrixsim.Dataplane, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "replies per probe: link 2%", cfg: perProbe, kind: matrixsim.LinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "replies per probe: spine 1%", cfg: perProbe, kind: matrixsim.SpineLoss, loss: 0.01, minPrec: 0.98, minRecall: 0.95},
	{name: "replies per probe: tor 1%", cfg: perProbe, kind: matrixsim.ToRLoss, loss: 0.01, minPrec: 0.98, minRecall: 0.95},
	{name: "replies per probe: host 2%", cfg: perProbe, kind: matrixsim.HostNIC, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "replies per probe, pods: spine 2%", cfg: perProbePods, kind: matrixsim.SpineLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "replies per probe, pods: link 2%", cfg: perProbePods, kind: matrixsim.LinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "silent routers: spine 2%", cfg: silentFabric, kind: matrixsim.SpineLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "silent routers: link 5%", cfg: silentFabric, kind: matrixsim.LinkLoss, loss: 0.05, minPrec: 0.98, minRecall: 0.95},
	{name: "silent routers: link 2%", cfg: silentFabric, kind: matrixsim.LinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "silent routers: tor 2%", cfg: silentFabric, kind: matrixsim.ToRLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "silent routers: host 2%", cfg: silentFabric, kind: matrixsim.HostNIC, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "silent routers: dataplane 5%", cfg: silentFabric, kind: matrixsim.Dataplane, loss: 0.05, minPrec: 0.98, minRecall: 0.95},
	{name: "silent routers, L2 racks: tor 2%", cfg: silentL2, kind: matrixsim.ToRLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "silent routers, L2 racks: link 2%", cfg: silentL2, kind: matrixsim.LinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "silent routers, L2 racks: host 2%", cfg: silentL2, kind: matrixsim.HostNIC, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "overlay: spine 2%", cfg: overlayFabric, kind: matrixsim.SpineLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "overlay: link 2%", cfg: overlayFabric, kind: matrixsim.LinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "overlay: tor 2%", cfg: overlayFabric, kind: matrixsim.ToRLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "overlay: host 2%", cfg: overlayFabric, kind: matrixsim.HostNIC, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "overlay: dataplane 5%", cfg: overlayFabric, kind: matrixsim.Dataplane, loss: 0.05, minPrec: 0.98, minRecall: 0.95},
	{name: "overlay, silent routers: spine 2%", cfg: silentOverlay, kind: matrixsim.SpineLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "overlay, silent routers: link 2%", cfg: silentOverlay, kind: matrixsim.LinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "lab shape: spine 5%", cfg: labShape, kind: matrixsim.SpineLoss, loss: 0.05, minPrec: 0.98, minRecall: 0.95},
	{name: "lab shape, overlay: spine 5%", cfg: labShapeOverlay, kind: matrixsim.SpineLoss, loss: 0.05, minPrec: 0.98, minRecall: 0.95},
	{name: "lab shape, overlay: link 5%", cfg: labShapeOverlay, kind: matrixsim.LinkLoss, loss: 0.05, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers: super-spine 2%", cfg: threeTier, kind: matrixsim.SuperLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers: aggregation switch 2%", cfg: threeTier, kind: matrixsim.SpineLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers: ToR-aggregation link 2%", cfg: threeTier, kind: matrixsim.LinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers: aggregation-super-spine link 2%", cfg: threeTier, kind: matrixsim.SuperLinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers: tor 2%", cfg: threeTier, kind: matrixsim.ToRLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers: host 2%", cfg: threeTier, kind: matrixsim.HostNIC, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers, overlay: super-spine 2%", cfg: threeTierOverlay, kind: matrixsim.SuperLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers, overlay: aggregation-super-spine link 2%", cfg: threeTierOverlay, kind: matrixsim.SuperLinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers, overlay: dataplane 5%", cfg: threeTierOverlay, kind: matrixsim.Dataplane, loss: 0.05, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers, silent routers: super-spine 2%", cfg: threeTierSilent, kind: matrixsim.SuperLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers, silent routers: ToR-aggregation link 2%", cfg: threeTierSilent, kind: matrixsim.LinkLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "PMTU black hole", cfg: large(evalFabric), kind: matrixsim.MTUBlackhole, minPrec: 0.98, minRecall: 0.95},
	{name: "pods: PMTU black hole", cfg: large(podFabric), kind: matrixsim.MTUBlackhole, minPrec: 0.98, minRecall: 0.95},
	{name: "lab shape: PMTU black hole", cfg: large(labShape), kind: matrixsim.MTUBlackhole, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers: PMTU black hole", cfg: large(threeTier), kind: matrixsim.MTUBlackhole, minPrec: 0.98, minRecall: 0.95},
	{name: "overlay: PMTU black hole", cfg: large(overlayFabric), kind: matrixsim.MTUBlackhole, minPrec: 0.98, minRecall: 0.95},
	// Silent routers: the uplinks of the rack the black-holed flows
	// enter or leave (unplacedPMTU), as the tier stage names loss there.
	{name: "silent routers: PMTU black hole", cfg: large(silentFabric), kind: matrixsim.MTUBlackhole, minPrec: 0.98, minRecall: 0.95},
	{name: "overlay, silent routers: PMTU black hole", cfg: large(silentOverlay), kind: matrixsim.MTUBlackhole, minPrec: 0.98, minRecall: 0.95},
	// Added delay (latencySuspects), 20 ms each way through the element,
	// the default threshold 10 ms.
	{name: "spine adds 20 ms", cfg: evalFabric, kind: matrixsim.SpineDelay, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "link adds 20 ms", cfg: evalFabric, kind: matrixsim.LinkDelay, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "pods: spine adds 20 ms", cfg: podFabric, kind: matrixsim.SpineDelay, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "lab shape: spine adds 20 ms", cfg: labShape, kind: matrixsim.SpineDelay, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "lab shape, overlay: spine adds 20 ms", cfg: labShapeOverlay, kind: matrixsim.SpineDelay, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "three tiers: aggregation switch adds 20 ms", cfg: threeTier, kind: matrixsim.SpineDelay, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "overlay: link adds 20 ms", cfg: overlayFabric, kind: matrixsim.LinkDelay, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	// Silent routers: the tier, or the uplinks of the rack the slow
	// flows enter or leave (unplacedLatency).
	{name: "silent routers: spine adds 20 ms", cfg: silentFabric, kind: matrixsim.SpineDelay, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "silent routers: link adds 20 ms", cfg: silentFabric, kind: matrixsim.LinkDelay, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "overlay, silent routers: spine adds 20 ms", cfg: silentOverlay, kind: matrixsim.SpineDelay, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "large probes, silent routers: link 5%", cfg: large(silentFabric), kind: matrixsim.LinkLoss, loss: 0.05, minPrec: 0.98, minRecall: 0.95},
	{name: "large probes, silent routers: spine 2%", cfg: large(silentFabric), kind: matrixsim.SpineLoss, loss: 0.02, minPrec: 0.98, minRecall: 0.95},
	{name: "large probes: link 5%", cfg: large(evalFabric), kind: matrixsim.LinkLoss, loss: 0.05, minPrec: 0.98, minRecall: 0.95},
	{name: "lab shape: spine 1%", cfg: labShape, kind: matrixsim.SpineLoss, loss: 0.01},
	{name: "lab shape, overlay: spine 1%", cfg: labShapeOverlay, kind: matrixsim.SpineLoss, loss: 0.01},
	// Healthy rows list nothing: precision is 1 only with no suspect.
	{name: "healthy", cfg: evalFabric, kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, 8 spines, 64 racks, 1% silent", cfg: bigFabric, kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, 10% of agents missing", cfg: evalFabric, kind: matrixsim.Healthy, missing: 0.1, minPrec: 1},
	{name: "healthy, racks inferred", cfg: unlabelled, kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, pods", cfg: podFabric, kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, large probes, pods", cfg: large(podFabric), kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, replies per probe", cfg: perProbe, kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, silent routers", cfg: silentFabric, kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, large probes, silent routers", cfg: large(silentFabric), kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, silent routers, L2 racks", cfg: silentL2, kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, overlay", cfg: overlayFabric, kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, overlay, silent routers", cfg: silentOverlay, kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, lab shape, overlay", cfg: labShapeOverlay, kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, three tiers", cfg: threeTier, kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, three tiers, overlay", cfg: threeTierOverlay, kind: matrixsim.Healthy, minPrec: 1},
	{name: "healthy, three tiers, silent routers", cfg: threeTierSilent, kind: matrixsim.Healthy, minPrec: 1},
}

// TestListQuality holds the whole list to the goals: every suspect listed
// (score >= matrix.ListScore) is a fault, and every fault is listed. 3
// trials a row by default, 50 with -eval (which logs the table for
// docs/performance.md). Replies take their own ECMP path in every row
// (matrixsim hashes them apart), in the "replies per probe" rows one per
// probe.
func TestListQuality(t *testing.T) {
	if testing.Short() {
		t.Skip("quality evaluation skipped in -short")
	}
	trials := 3
	if *evalFull {
		trials = 50
	}
	for i, row := range listRows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			fab, err := matrixsim.New(row.cfg)
			if err != nil {
				t.Fatal(err)
			}
			rng := rand.New(rand.NewPCG(uint64(i), 16))
			var listed, right, found, faults int
			for trial := range trials {
				ft := fab.Random(row.kind, row.loss, rng)
				if row.duty > 0 {
					ft.Loss *= row.duty
				}
				truth := map[string]bool{}
				if kind, name := fab.Truth(ft); kind != "" {
					truth[kind+"/"+name] = true
				}
				if row.two {
					for len(truth) < 2 {
						o := fab.Random(row.kind, row.loss, rng)
						k, n := fab.Truth(o)
						if !truth[k+"/"+n] {
							truth[k+"/"+n] = true
							ft.And = []matrixsim.Fault{o}
						}
					}
				}
				d := localize(t, fab, ft, uint64(1000*i+trial), func() bool { return row.missing > 0 && rng.Float64() < row.missing })
				named := map[string]bool{}
				for _, s := range d.Listed() {
					listed++
					if truth[s.Kind+"/"+s.Name] {
						right++
						named[s.Kind+"/"+s.Name] = true
					} else if testing.Verbose() {
						t.Logf("trial %d: truth %v, listed %s/%s at %.2f", trial, truth, s.Kind, s.Name, s.Score)
					}
				}
				faults += len(truth)
				found += len(named)
			}
			listCount{listed, right, faults, found}.check(t, row.name, trials, row.minPrec, row.minRecall)
		})
	}
}

// listCount tallies whole lists: suspects listed, of them faults; faults
// injected, of them listed.
type listCount struct{ listed, right, faults, found int }

// check logs row's line of the table with -eval and fails below the
// floors of list precision and recall.
func (c listCount) check(t *testing.T, row string, trials int, minPrec, minRecall float64) {
	t.Helper()
	prec, recall := 1.0, 1.0
	if c.listed > 0 {
		prec = float64(c.right) / float64(c.listed)
	}
	if c.faults > 0 {
		recall = float64(c.found) / float64(c.faults)
	}
	if *evalFull {
		t.Logf("| %s | %d | %.2f (%d of %d) | %.2f (%d of %d) |", row, trials, prec, c.right, c.listed, recall, c.found, c.faults)
	}
	if prec < minPrec || recall < minRecall {
		t.Errorf("list precision %.2f (%d of %d), recall %.2f (%d of %d); want >= %.2f and >= %.2f",
			prec, c.right, c.listed, recall, c.found, c.faults, minPrec, minRecall)
	}
}
