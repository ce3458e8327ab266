package matrix_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// drawFabric draws a fabric nobody chose: racks of 2 to 40 nodes (14 with
// pod agents), 3 to 16 racks, 2 to 16 spines or, one time in three, three
// tiers (fabric pods of 2 or more racks with 2 to 8 aggregation switches
// each, 2 to 8 super-spines), pod agents or not, an
// overlay under them or not, rack labels or not, replies per flow or per
// probe, 0-50 % of hops silent or every router silent, 2 to 16 flows a
// target and 8 to 64 probes a flow in the window (the plan's rates and
// windows), a background of 0 to 1e-4 per link.
func drawFabric(rng *rand.Rand) matrixsim.Config {
	c := matrixsim.Config{
		Racks: 3 + rng.IntN(14), Spines: 2 + rng.IntN(15),
		Pods: rng.IntN(2) == 0, NoRackLabels: rng.IntN(2) == 0, ReplyPerProbe: rng.IntN(4) == 0,
		FlowsPerTarget: 2 + rng.IntN(15), ProbesPerFlow: 8 + rng.IntN(57),
		SilentHop: rng.Float64() * 0.5, Background: rng.Float64() * 1e-4,
	}
	c.NodesPerRack = 2 + rng.IntN(39)
	if c.Pods {
		c.NodesPerRack = 2 + rng.IntN(13)
		c.Overlay = rng.IntN(2) == 0
	}
	if rng.IntN(5) == 0 {
		c.SilentRouters, c.SilentHop = true, 0
	}
	if rng.IntN(3) == 0 {
		threeTiers(&c, rng)
	}
	return c
}

// describe says what fabric c is.
func describe(c matrixsim.Config) string {
	var kinds []string
	for _, k := range []struct {
		on   bool
		name string
	}{{c.Pods, "pods"}, {c.Overlay, "overlay"}, {c.NoRackLabels, "no labels"}, {c.ReplyPerProbe, "IPv6, replies per probe"}, {c.SilentRouters, "silent routers"}} {
		if k.on {
			kinds = append(kinds, k.name)
		}
	}
	upper := fmt.Sprintf("%d spines", c.Spines)
	if c.SuperSpines > 0 {
		upper = fmt.Sprintf("pods of %d racks with %d aggregation switches, %d super-spines", c.RacksPerPod, c.Spines, c.SuperSpines)
	}
	return fmt.Sprintf("%d racks x %d, %s, %d flows x %d, %.0f%% silent hops [%s]",
		c.Racks, c.NodesPerRack, upper, c.FlowsPerTarget, c.ProbesPerFlow, 100*c.SilentHop, strings.Join(kinds, ", "))
}

// localizeDrawn is one round of the drawn fabric under ft. Replies that
// take a path per probe are IPv6's (a target labelling each SYN-ACK
// afresh, a fabric hashing the label): an IPv4 reply keeps its 5-tuple,
// so its path. Those trials report over IPv6, as such a cluster would.
func localizeDrawn(t testing.TB, c matrixsim.Config, fab *matrixsim.Fabric, ft matrixsim.Fault, seed uint64) matrix.Diagnosis {
	if !c.ReplyPerProbe {
		return localize(t, fab, ft, seed, nil)
	}
	return diagnose(t, hops6(fab), ipv6Reports(fab.Observations(ft, seed)))
}

// threeTiers makes c a three-tier Clos: fabric pods of 2 to half its
// racks, 2 to 8 aggregation switches in each, 2 to 8 super-spines.
func threeTiers(c *matrixsim.Config, rng *rand.Rand) {
	c.RacksPerPod = 2 + rng.IntN(max(1, c.Racks/2-1))
	c.Spines, c.SuperSpines = 2+rng.IntN(7), 2+rng.IntN(7)
}

// randomClasses are the fault classes of the drawn evaluation, each at a
// loss drawn from 2-5 % (the delay classes: 20-50 ms).
// The super-spine classes draw three tiers every time.
var randomClasses = []matrixsim.Kind{matrixsim.LinkLoss, matrixsim.SpineLoss, matrixsim.ToRLoss, matrixsim.HostNIC, matrixsim.Dataplane, matrixsim.Healthy,
	matrixsim.SuperLoss, matrixsim.SuperLinkLoss, matrixsim.SpineDelay, matrixsim.LinkDelay}

var randomTrials = flag.Int("random.trials", 50, "TestListQualityRandom's trials a class with -eval")

// TestListQualityRandom measures the whole list on fabrics and faults
// drawn at random, not the shapes the code was tuned on: 10 trials a
// class by default, 50 with -eval (which logs the table for
// docs/performance.md and every miss). The goals are precision >= 0.98
// and recall >= 0.95; the draws are seeded, and the floor asserted is
// what the estimator holds today (docs/performance.md has where it falls
// short of the goals), so that no change makes it worse unseen.
func TestListQualityRandom(t *testing.T) {
	if testing.Short() {
		t.Skip("quality evaluation skipped in -short")
	}
	trials := 10
	if *evalFull {
		trials = *randomTrials
	}
	for ci, k := range randomClasses {
		// A link between an aggregation switch and a super-spine is one
		// of up to 64 paths between fabric pods, crossed by few flows:
		// its floor is what its first 10 trials hold (0.86 / 0.60; 0.91
		// / 0.78 over 50), the class furthest from the goals
		// (docs/performance.md).
		minPrec, minRecall := 0.9, 0.9
		if k == matrixsim.SuperLinkLoss {
			minPrec, minRecall = 0.85, 0.6
		}
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(ci), 28))
			var listed, right, found, faults int
			for trial := range trials {
				cfg := drawFabric(rng)
				if k == matrixsim.Dataplane && !cfg.Pods {
					cfg.Pods, cfg.NodesPerRack = true, min(cfg.NodesPerRack, 14)
				}
				if (k == matrixsim.SuperLoss || k == matrixsim.SuperLinkLoss) && cfg.SuperSpines == 0 {
					threeTiers(&cfg, rng)
				}
				drawn := describe(cfg)
				fab, err := matrixsim.New(cfg)
				if err != nil {
					t.Fatalf("%s: %v", drawn, err)
				}
				ft := fab.Random(k, 0.02+0.03*rng.Float64(), rng)
				kind, name := fab.Truth(ft)
				if kind != "" {
					faults++
				}
				d := localizeDrawn(t, cfg, fab, ft, uint64(1000*ci+trial))
				hit := false
				for _, s := range d.Listed() {
					listed++
					if s.Kind == kind && s.Name == name {
						right++
						hit = true
					} else if *evalFull || testing.Verbose() {
						t.Logf("trial %d (%s): %s %s at %.3f, listed %s %s at %.2f", trial, drawn, kind, name, ft.Loss, s.Kind, s.Name, s.Score)
					}
				}
				if hit {
					found++
				} else if kind != "" && (*evalFull || testing.Verbose()) {
					t.Logf("trial %d (%s): %s %s at %.3f not listed", trial, drawn, kind, name, ft.Loss)
				}
			}
			// The goals are 0.98 and 0.95: docs/performance.md.
			listCount{listed, right, faults, found}.check(t, string(k)+" 2-5%", trials, minPrec, minRecall)
		})
	}
}

// TestDeviceBesideItsLink: a lossy link between an aggregation switch
// and a super-spine (a drawn trial's fabric), whose replies cross it on
// paths no trace sampled. The devices that hold the link took that
// residue at 0.2 % and were listed at 0.25-0.33 beside it in 3 of 6
// seeds (and a link of the super-spine in a fourth); a device beside its
// own chosen link must be surer. One seed of six still lists its
// super-spine (docs/performance.md).
func TestDeviceBesideItsLink(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{
		Racks: 15, NodesPerRack: 6, Spines: 4, SuperSpines: 5, RacksPerPod: 6,
		FlowsPerTarget: 6, ProbesPerFlow: 54, SilentHop: 0.2, Background: 1e-4,
	})
	if err != nil {
		t.Fatal(err)
	}
	ft := matrixsim.Fault{Kind: matrixsim.SuperLinkLoss, Loss: 0.049, Spine: 0, Super: 0}
	kind, name := fab.Truth(ft)
	innocent := 0
	for seed := range uint64(6) {
		d := localize(t, fab, ft, 7043+seed, nil)
		found := false
		for _, s := range d.Listed() {
			if s.Kind == kind && s.Name == name {
				found = true
			} else {
				innocent++
				t.Logf("seed %d: %s %s listed at %.2f beside %s %s", seed, s.Kind, s.Name, s.Score, kind, name)
			}
		}
		if !found {
			t.Errorf("seed %d: %s %s not listed", seed, kind, name)
		}
	}
	if innocent > 1 {
		t.Errorf("%d innocents listed over 6 seeds, want at most 1", innocent)
	}
}

// TestSiblingOnFewProbes: a lossy spine on TestCluster's shape (2 racks
// of 2 nodes, 2 spines) in the window a fault begins, when each flow has
// lost a probe or two: a flow whose forward path crosses the clean spine
// loses on its reply's path through the lossy one, which no trace shows,
// and the per-link fit put that loss on the clean spine's links. The
// lossy spine was never weighed, and the clean spine's links were listed
// alone (seed 004 on the cluster, 12 s after the fault). Now the lossy
// spine is weighed as a rival of what the selector names first, and a
// suspect that it explains about as well (within what naming the first
// needs) is named tied with it. Over these 200 rounds the innocents
// listed untied fell from 16 to 0, and the spine was named in 111
// rounds, not 102.
func TestSiblingOnFewProbes(t *testing.T) {
	t.Parallel()
	innocent, named := 0, 0
	for _, loss := range []float64{0.02, 0.05} {
		cfg := matrixsim.Config{Racks: 2, NodesPerRack: 2, Spines: 2, FlowsPerTarget: 8, ProbesPerFlow: 10, SilentHop: 0.1, Background: 1e-5}
		fab, err := matrixsim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		ft := matrixsim.Fault{Kind: matrixsim.SpineLoss, Spine: 0, Loss: loss}
		kind, name := fab.Truth(ft)
		culprit := matrix.Ref{Kind: kind, Name: name}
		ofSpine := func(r matrix.Ref) bool {
			return r == culprit || r.Kind == matrix.KindLink && slices.Contains(strings.Split(r.Name, "->"), name)
		}
		for seed := range uint64(100) {
			for _, s := range localize(t, fab, ft, seed, nil).Listed() {
				switch {
				case s.Kind == kind && s.Name == name:
					named++
				case ofSpine(matrix.Ref{Kind: s.Kind, Name: s.Name}), slices.ContainsFunc(s.Evidence.Ties, ofSpine), s.Kind == matrix.KindTier && s.Name == "spine":
				default:
					innocent++
					t.Logf("loss %.2f seed %d: %s %s listed at %.2f: %s", loss, seed, s.Kind, s.Name, s.Score, s.Evidence.Detail)
				}
			}
		}
	}
	t.Logf("%s named in %d of 200 rounds, %d innocents listed", "spine1", named, innocent)
	if innocent > 2 {
		t.Errorf("%d innocents listed untied with the lossy spine over 200 rounds, want at most 2", innocent)
	}
}
