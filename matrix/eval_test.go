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

func localize(t testing.TB, fab *matrixsim.Fabric, ft matrixsim.Fault, seed uint64) matrix.Diagnosis {
	m, err := matrix.New(matrix.Config{GroupBy: "rack", Hops: fab.Hops()})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range fab.Observations(ft, seed) {
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
		d := localize(t, fab, ft, seed*1000+uint64(i))
		s.trials++
		if len(d.Suspects) == 0 {
			continue
		}
		s.named++
		kind, name := fab.Truth(ft)
		for _, sp := range d.Suspects {
			if sp.Score >= 0.1 {
				s.listed++
				if sp.Kind == kind && sp.Name == name {
					s.listedRight++
				}
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
			if d := localize(t, fab, matrixsim.Fault{Kind: matrixsim.Healthy}, uint64(100+i)); len(d.Suspects) > 0 {
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
// then Localize. Reported per round.
func BenchmarkLocalize5000(b *testing.B) {
	for _, k := range []matrixsim.Kind{matrixsim.Healthy, matrixsim.LinkLoss, matrixsim.Blackhole} {
		b.Run(string(k), func(b *testing.B) {
			cfg := matrixsim.Config{Racks: 125, NodesPerRack: 40, Spines: 8, LB: true,
				FlowsPerTarget: 4, ProbesPerFlow: 2, SilentHop: 0.05, Background: 1e-4}
			fab, err := matrixsim.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			ft := matrixsim.Fault{Kind: k, Loss: 0.02, Rack: 7, Spine: 3}
			obs := fab.Observations(ft, 1)
			m, _ := matrix.New(matrix.Config{GroupBy: "rack", Hops: fab.Hops()})
			for _, o := range obs {
				m.Observe(t0, o)
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
