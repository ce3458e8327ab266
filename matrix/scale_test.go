package matrix_test

import (
	"flag"
	"syscall"
	"testing"
	"time"

	"github.com/netprober/prober/matrix"
	"github.com/netprober/prober/matrix/matrixsim"
)

var (
	evalScale  = flag.Bool("scale", false, "measure CPU per localization round (TestScaleCPU)")
	scaleNodes = flag.Int("scale.nodes", 5000, "TestScaleCPU's cluster: 5000 (125 racks of 40, 8 spines) or 10000 (250 racks of 40, 16 spines)")
	scaleDual  = flag.Bool("scale.dual", false, "TestScaleCPU's agents probe both families (each round's IPv4 reports with a second round's as IPv6)")
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func userTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano())
}

// TestScaleCPU measures the process CPU time (all threads, GC included)
// of steady-state rounds at 5,000 or 10,000 nodes: Observe of every
// report, then Localize. Run with -scale [-scale.nodes 10000]
// [-scale.dual]. Each row ends in one line a script reads:
// "scale: nodes=N family=ipv4|dual fault=F cpu_per_round=SECONDS
// top_right=true|false".
func TestScaleCPU(t *testing.T) {
	if !*evalScale {
		t.Skip("run with -scale")
	}
	cfg := matrixsim.Config{Racks: 125, NodesPerRack: 40, Spines: 8, LB: true, FlowsPerTarget: 4, ProbesPerFlow: 2, SilentHop: 0.05, Background: 1e-4}
	switch *scaleNodes {
	case 5000:
	case 10000:
		cfg.Racks, cfg.Spines = 250, 16
	default:
		t.Fatalf("-scale.nodes %d: 5000 or 10000", *scaleNodes)
	}
	fab, err := matrixsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []matrixsim.Kind{matrixsim.Healthy, matrixsim.LinkLoss, matrixsim.SpineLoss, matrixsim.Blackhole} {
		ft := matrixsim.Fault{Kind: k, Loss: 0.02, Rack: 7, Spine: 3}
		obs := fab.Observations(ft, 1)
		hops, family := fab.Hops(), "ipv4"
		if *scaleDual {
			obs, hops, family = dualStack(obs, fab.Observations(ft, 2)), hops6(fab), "dual"
		}
		m, _ := matrix.New(matrix.Config{GroupBy: "rack", Hops: hops})
		var obsCPU, locCPU, user time.Duration
		const rounds = 5
		var d matrix.Diagnosis
		for i := range rounds + 1 {
			u := userTime()
			a := cpuTime()
			for _, o := range obs {
				if err := m.Observe(t0, o); err != nil {
					t.Fatal(err)
				}
			}
			b := cpuTime()
			d = m.Localize(t0)
			c := cpuTime()
			if i > 0 { // the first round grows the reused storage
				obsCPU += b - a
				locCPU += c - b
				user += userTime() - u
			}
		}
		kind, name := fab.Truth(ft)
		top := "none"
		if len(d.Suspects) > 0 {
			top = d.Suspects[0].Kind + "/" + d.Suspects[0].Name
		}
		want := kind + "/" + name
		right := kind == "" && len(d.Suspects) == 0 || kind != "" && top == want
		if !right {
			t.Errorf("%s: top suspect %s, want %s", k, top, cmpOr(want, "none"))
		}
		flows := 0
		for _, o := range obs {
			for _, tg := range o.Targets {
				for _, p := range tg.Protocols {
					flows += len(p.Flows)
				}
			}
		}
		t.Logf("%-10s flows %d: CPU per round: observe %v + localize %v = %v (user %v); top %s (truth %s/%s), %d suspects",
			k, flows, obsCPU/rounds, locCPU/rounds, (obsCPU+locCPU)/rounds, user/rounds, top, kind, name, len(d.Suspects))
		t.Logf("scale: nodes=%d family=%s fault=%s cpu_per_round=%.3f top_right=%v", *scaleNodes, family, k, ((obsCPU + locCPU) / rounds).Seconds(), right)
	}
}

func cmpOr(a, b string) string {
	if a == "/" {
		return b
	}
	return a
}
