package matrix_test

import (
	"strings"
	"testing"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

// TestLatency: a spine that delays what it forwards by 20 ms is named,
// alone, as a latency suspect adding about that; so is one direction of
// one link, and not its spine. Delay below the threshold names nothing
// and the threshold is the user's: 4 ms is named at latencyMs 2. A
// delaying spine beside a lossy link: each is named for what it does.
func TestLatency(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{Racks: 3, NodesPerRack: 3, Spines: 3, Pods: true, FlowsPerTarget: 4, ProbesPerFlow: 30, SilentHop: 0.2, Background: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	run := func(ft matrixsim.Fault, latencyMs float64) matrix.Diagnosis {
		t.Helper()
		m, err := matrix.New(matrix.Config{GroupBy: "rack", Hops: fab.Hops(), Thresholds: matrix.Thresholds{LatencyMs: latencyMs}})
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range fab.Observations(ft, 7) {
			if err := m.Observe(t0, o); err != nil {
				t.Fatal(err)
			}
		}
		return m.Localize(t0)
	}
	one := func(what string, d matrix.Diagnosis, name string, added float64) {
		t.Helper()
		l := d.Listed()
		if len(l) != 1 || l[0].Kind != matrix.KindLatency || l[0].Name != name {
			t.Fatalf("%s: listed %v, want latency/%s alone", what, brief(l), name)
		}
		if a := l[0].AddedDelay; a < added*0.9 || a > added*2.1 {
			t.Errorf("%s: adds %.4g s, want about %.4g", what, a, added)
		}
		if ev := l[0].Evidence; ev.Stage != "latency" || ev.LossyFlows < 2 || len(ev.Examples) == 0 || ev.PValue >= 0.01 {
			t.Errorf("%s: evidence %+v: want the latency stage, its slow flows, examples", what, ev)
		}
	}
	one("spine2 adds 20 ms", run(matrixsim.Fault{Kind: matrixsim.SpineDelay, Spine: 1, Delay: 0.020}, 0), "spine2", 0.020)
	one("tor1->spine3 adds 20 ms", run(matrixsim.Fault{Kind: matrixsim.LinkDelay, Rack: 0, Spine: 2, Up: true, Delay: 0.020}, 0), "tor1->spine3", 0.020)
	if l := run(matrixsim.Fault{Kind: matrixsim.SpineDelay, Spine: 1, Delay: 0.004}, 0).Listed(); len(l) != 0 {
		t.Errorf("4 ms each way, below the default 10: listed %v, want nothing", brief(l))
	}
	one("4 ms at latencyMs 2", run(matrixsim.Fault{Kind: matrixsim.SpineDelay, Spine: 1, Delay: 0.004}, 2), "spine2", 0.004)
	both := run(matrixsim.Fault{Kind: matrixsim.SpineDelay, Spine: 0, Delay: 0.030,
		And: []matrixsim.Fault{{Kind: matrixsim.LinkLoss, Rack: 2, Spine: 2, Up: true, Loss: 0.05}}}, 0)
	got := map[string]bool{}
	for _, s := range both.Listed() {
		got[s.Kind+"/"+s.Name] = true
	}
	if len(got) != 2 || !got["latency/spine1"] || !got["link/tor3->spine3"] {
		t.Errorf("spine1 adds 30 ms, tor3->spine3 loses 5%%: listed %v", brief(both.Listed()))
	}
}

// TestLatencyBusyAgent: one agent times every flow 30 ms late (its node
// is busy): nothing is named, since the flows to it, whose replies leave
// by its links, are fast, and on a silent fabric no tier either. Its
// uplink slow both ways is named.
func TestLatencyBusyAgent(t *testing.T) {
	t.Parallel()
	for _, silent := range []bool{false, true} {
		t.Run(map[bool]string{false: "routed", true: "silent"}[silent], func(t *testing.T) { busyAgent(t, silent) })
	}
}

func busyAgent(t *testing.T, silent bool) {
	fab, err := matrixsim.New(matrixsim.Config{Racks: 3, NodesPerRack: 3, Spines: 3, FlowsPerTarget: 4, ProbesPerFlow: 30, Background: 1e-4, SilentRouters: silent})
	if err != nil {
		t.Fatal(err)
	}
	obs := fab.Observations(matrixsim.Fault{Kind: matrixsim.Healthy}, 3)
	busy := fab.NodeName(1, 1)
	for i := range obs {
		if obs[i].Agent.Name != busy {
			continue
		}
		for j := range obs[i].Targets {
			for k := range obs[i].Targets[j].Protocols {
				p := &obs[i].Targets[j].Protocols[k]
				for f := range p.Flows {
					p.Flows[f].RTTP50 += 0.030
				}
			}
		}
	}
	if l := diagnose(t, fab.Hops(), obs).Listed(); len(l) != 0 {
		t.Errorf("%s times its flows 30 ms late: listed %v, want nothing", busy, brief(l))
	}
	// Now its link is slow: the flows to it are late too.
	for i := range obs {
		for j := range obs[i].Targets {
			if obs[i].Targets[j].Name != busy {
				continue
			}
			for k := range obs[i].Targets[j].Protocols {
				p := &obs[i].Targets[j].Protocols[k]
				for f := range p.Flows {
					p.Flows[f].RTTP50 += 0.030
				}
			}
		}
	}
	l := diagnose(t, fab.Hops(), obs).Listed()
	if len(l) == 0 {
		t.Fatalf("%s's link adds 30 ms both ways: nothing listed", busy)
	}
	for _, s := range l {
		if s.Kind != matrix.KindLatency || !strings.Contains(s.Name, busy) {
			t.Errorf("%s's link adds 30 ms both ways: listed %v, want %s or its links, tied", busy, brief(l), busy)
		}
	}
}

// TestLatencyThresholdChecked: the threshold is checked with its path.
func TestLatencyThresholdChecked(t *testing.T) {
	t.Parallel()
	for _, ms := range []float64{-1, 1e9} {
		if _, err := matrix.New(matrix.Config{Thresholds: matrix.Thresholds{LatencyMs: ms}}); err == nil {
			t.Errorf("latencyMs %v: accepted", ms)
		} else if want := "thresholds.latencyMs"; !strings.Contains(err.Error(), want) {
			t.Errorf("latencyMs %v: %v, want it to name %s", ms, err, want)
		}
	}
}

// TestLatencyExplainsLB: a spine in front of the LB delays past the
// HTTP/2 PINGs' timeout, so the PINGs of the agents at the ends of slow
// flows die while their SYNs to the VIP pass: the spine is named for
// latency and the LB is not (flowFaultExplainsLB, as for a black hole).
func TestLatencyExplainsLB(t *testing.T) {
	t.Parallel()
	fab, err := matrixsim.New(matrixsim.Config{Racks: 3, NodesPerRack: 3, Spines: 3, LB: true, FlowsPerTarget: 4, ProbesPerFlow: 30, Background: 1e-4})
	if err != nil {
		t.Fatal(err)
	}
	ft := matrixsim.Fault{Kind: matrixsim.SpineDelay, Spine: 1, Delay: 0.150}
	for seed := range uint64(4) {
		obs := fab.Observations(ft, seed)
		// An agent with a flow 100 ms slower than the fastest is an end
		// of a slow flow; so is that flow's target.
		floor := 1.0
		for _, o := range obs {
			for _, tg := range o.Targets {
				for _, p := range tg.Protocols {
					for _, f := range p.Flows {
						if p.Protocol == api.ProtocolTCPSYN && f.RTTP50 > 0 {
							floor = min(floor, f.RTTP50)
						}
					}
				}
			}
		}
		ends := map[string]bool{}
		for _, o := range obs {
			for _, tg := range o.Targets {
				for _, p := range tg.Protocols {
					for _, f := range p.Flows {
						if p.Protocol == api.ProtocolTCPSYN && tg.Class != api.ClassLB && f.RTTP50 > floor+0.1 {
							ends[o.Agent.Name], ends[tg.Name] = true, true
						}
					}
				}
			}
		}
		cut := 0
		for i := range obs {
			for j := range obs[i].Targets {
				tg := &obs[i].Targets[j]
				for k := range tg.Protocols {
					if p := &tg.Protocols[k]; tg.Class == api.ClassLB && p.Protocol == api.ProtocolHTTP2Ping && ends[obs[i].Agent.Name] {
						p.Lost, p.LossRatio = p.Sent, 1
						cut++
					}
				}
			}
		}
		if cut < 2 {
			t.Fatalf("seed %d: %d agents' PINGs cut: the test's fault did not take", seed, cut)
		}
		l := diagnose(t, fab.Hops(), obs).Listed()
		if len(l) != 1 || l[0].Kind != matrix.KindLatency || l[0].Name != "spine2" {
			t.Errorf("seed %d: PINGs timing out behind a delaying spine: listed %v, want latency/spine2 alone", seed, brief(l))
		}
	}
}
