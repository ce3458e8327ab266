package matrix

import (
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix/matrixsim"
)

// clusterCapture is one capture of a real cluster (testdata/cluster, see
// its README): the matrix's hops config and every agent's observations.
type clusterCapture struct {
	Hops         map[string]string  `json:"hops"`
	Observations []api.Observations `json:"observations"`
}

func loadCapture(t *testing.T, name string) clusterCapture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "cluster", name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var c clusterCapture
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

// localizeCapture feeds a capture to a Matrix grouped by node, as the
// cluster's matrix is deployed, and localizes at the latest report.
func localizeCapture(t *testing.T, c clusterCapture) Diagnosis {
	t.Helper()
	m, err := New(Config{GroupBy: "node", Hops: c.Hops})
	if err != nil {
		t.Fatal(err)
	}
	var now time.Time
	for _, o := range c.Observations {
		if o.Time.After(now) {
			now = o.Time
		}
	}
	for _, o := range c.Observations {
		if err := m.Observe(now, o); err != nil {
			t.Fatal(err)
		}
	}
	return m.Localize(now)
}

// alarming is the score from which a suspect sends someone to a device.
const alarming = 0.1

// checkNamed reports what is wrong with d when the suspects scoring at
// least alarming must be exactly one of the sets in want (each "kind/name"),
// the members of a set scoring the same (a tie the data cannot break).
// An empty set in want allows no suspect at all.
func checkNamed(d Diagnosis, want [][]string) error {
	var got []string
	var scores []float64
	for _, s := range d.Suspects {
		if s.Score >= alarming {
			got = append(got, s.Kind+"/"+s.Name)
			scores = append(scores, s.Score)
		}
	}
	sorted := slices.Sorted(slices.Values(got))
	for _, w := range want {
		if !slices.Equal(sorted, slices.Sorted(slices.Values(w))) {
			continue
		}
		for _, sc := range scores {
			if math.Abs(sc-scores[0]) > 1e-9 {
				return fmt.Errorf("named %v with scores %v, want a tie", got, scores)
			}
		}
		return nil
	}
	return fmt.Errorf("named %v (scores %v), want one of %v", got, scores, want)
}

func describeSuspects(d Diagnosis) string {
	var b strings.Builder
	for _, s := range d.Suspects {
		fmt.Fprintf(&b, "\n  %s/%s %.3f est %.3f %s: %s", s.Kind, s.Name, s.Score, s.EstimatedLoss, s.Evidence.Stage, s.Evidence.Detail)
	}
	return b.String()
}

var captureFile = flag.String("capture", "", "TestCaptureFile: a capture TestCluster wrote on a wrong diagnosis (testbed's capture)")

// TestCaptureFile localizes one capture file, as TestClusterCaptures
// does its own, and logs the suspects: the first step of turning a wrong
// diagnosis TestCluster saw into a test here.
func TestCaptureFile(t *testing.T) {
	if *captureFile == "" {
		t.Skip("no -capture file given")
	}
	b, err := os.ReadFile(*captureFile)
	if err != nil {
		t.Fatal(err)
	}
	var c clusterCapture
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", *captureFile, err)
	}
	if len(c.Observations) == 0 {
		t.Fatalf("%s: no observations", *captureFile)
	}
	t.Logf("%d agents' reports; suspects:%s", len(c.Observations), describeSuspects(localizeCapture(t, c)))
}

// TestClusterCaptures localizes what a real cluster's agents reported
// (2 racks x 2 nodes, 2 spines, a prober pod per node, lb targets; one
// fault injected per capture) and wants the right suspect and nothing
// else scoring alarming, or an honest tie where the data cannot tell.
func TestClusterCaptures(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		capture string
		want    [][]string
	}{
		{"spine1-5pct", [][]string{{"device/spine1"}}},
		{"spine2-1pct", [][]string{{"device/spine2"}}},
		// With two racks every flow that crosses tor1->spine2 also
		// crosses spine2->tor2.
		{"link-tor1-spine2", [][]string{{"link/tor1->spine2"}, {"link/tor1->spine2", "link/spine2->tor2"}}},
		{"tor2-5pct", [][]string{{"device/tor2"}}},
		{"nic-n12", [][]string{{"host/n12"}}},
		// 0.1 % on spine1: at most spine1.
		{"healthy", [][]string{{}, {"device/spine1"}}},
	} {
		t.Run(tc.capture, func(t *testing.T) {
			t.Parallel()
			d := localizeCapture(t, loadCapture(t, tc.capture))
			if err := checkNamed(d, tc.want); err != nil {
				t.Errorf("%v; suspects:%s", err, describeSuspects(d))
			}
		})
	}
}

// clusterShape is the lab cluster of the captures as the simulator makes
// it: 2 racks x 2 nodes whose ToRs switch their rack at L2, 2 spines, a
// prober pod per node whose first hop is its node, the API server's LB
// VIP and the kubernetes Service's ClusterIP, 8 flows of 60 probes per
// target (one probe a second over a 60 s window), a tenth of the hops
// silent, as measured there.
var clusterShape = matrixsim.Config{Racks: 2, NodesPerRack: 2, Spines: 2, LB: true, ClusterIP: "192.0.2.1",
	Pods: true, L2Racks: true, FlowsPerTarget: 8, ProbesPerFlow: 60, SilentHop: 0.1, Background: 1e-4}

// TestClusterShape holds the simulated cluster of the captures, and the
// same with three racks, to what TestClusterCaptures holds the real one:
// over seeds and places, the right suspect and nothing else scoring
// alarming, or an honest tie where the data cannot tell. With two racks
// a ToR-spine link and the spine's link to the other rack carry the same
// flows; with three they do not.
func TestClusterShape(t *testing.T) {
	t.Parallel()
	threeRacks := clusterShape
	threeRacks.Racks = 3
	for _, cfg := range []matrixsim.Config{clusterShape, threeRacks} {
		fab, err := matrixsim.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		other := func(rack int) int { return (rack + 1) % cfg.Racks }
		type fc struct {
			name  string
			fault matrixsim.Fault
			want  [][]string
		}
		var cases []fc
		cases = append(cases, fc{"healthy", matrixsim.Fault{Kind: matrixsim.Healthy}, [][]string{{}}})
		for s := range cfg.Spines {
			spine := "device/" + matrixsim.SpineName(s)
			cases = append(cases, fc{fmt.Sprintf("%s 0.05", matrixsim.SpineName(s)),
				matrixsim.Fault{Kind: matrixsim.SpineLoss, Loss: 0.05, Spine: s}, [][]string{{spine}}})
			// At 1 % a minute of probes between two racks (some 60
			// lost) cannot always tell the spine from one direction of
			// its links: every round trip crosses it one way or the
			// other. Then the spine's own links are named, tied, the
			// spine beside them or not; never anything else.
			want := [][]string{{spine}}
			if cfg.Racks == 2 {
				for r := range 2 {
					pair := []string{"link/" + matrixsim.TorName(r) + "->" + matrixsim.SpineName(s), "link/" + matrixsim.SpineName(s) + "->" + matrixsim.TorName(other(r))}
					want = append(want, pair, append([]string{spine}, pair...))
				}
			}
			cases = append(cases, fc{fmt.Sprintf("%s 0.01", matrixsim.SpineName(s)),
				matrixsim.Fault{Kind: matrixsim.SpineLoss, Loss: 0.01, Spine: s}, want})
		}
		for r := range cfg.Racks {
			ft := matrixsim.Fault{Kind: matrixsim.ToRLoss, Loss: 0.05, Rack: r}
			cases = append(cases, fc{fmt.Sprintf("tor%d", r+1), ft, [][]string{{"device/" + matrixsim.TorName(r)}}})
			for i := range cfg.NodesPerRack {
				ft := matrixsim.Fault{Kind: matrixsim.HostNIC, Loss: 0.1, Rack: r, Node: i}
				cases = append(cases, fc{fab.NodeName(r, i) + " NIC", ft, [][]string{{"host/" + fab.NodeName(r, i)}}})
			}
			for s := range cfg.Spines {
				up, down := matrixsim.TorName(r)+"->"+matrixsim.SpineName(s), matrixsim.SpineName(s)+"->"+matrixsim.TorName(r)
				upWant, downWant := [][]string{{"link/" + up}}, [][]string{{"link/" + down}}
				if cfg.Racks == 2 {
					upWant = append(upWant, []string{"link/" + up, "link/" + matrixsim.SpineName(s) + "->" + matrixsim.TorName(other(r))})
					downWant = append(downWant, []string{"link/" + down, "link/" + matrixsim.TorName(other(r)) + "->" + matrixsim.SpineName(s)})
				}
				cases = append(cases,
					fc{"link " + up, matrixsim.Fault{Kind: matrixsim.LinkLoss, Loss: 0.05, Rack: r, Spine: s, Up: true}, upWant},
					fc{"link " + down, matrixsim.Fault{Kind: matrixsim.LinkLoss, Loss: 0.05, Rack: r, Spine: s}, downWant})
			}
		}
		for _, tc := range cases {
			t.Run(fmt.Sprintf("%d racks/%s", cfg.Racks, tc.name), func(t *testing.T) {
				t.Parallel()
				for seed := range uint64(8) {
					m, err := New(Config{GroupBy: "node", Hops: fab.Hops()})
					if err != nil {
						t.Fatal(err)
					}
					for _, o := range fab.Observations(tc.fault, seed) {
						if err := m.Observe(t0, o); err != nil {
							t.Fatal(err)
						}
					}
					d := m.Localize(t0)
					if err := checkNamed(d, tc.want); err != nil {
						t.Errorf("seed %d: %v; suspects:%s", seed, err, describeSuspects(d))
					}
				}
			})
		}
	}
}
