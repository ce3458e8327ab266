package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/netprober/prober/api"
)

// TestAgentTracesFlows: with tracing on, every tcp_syn flow of a loopback
// target gets a path (reason new) in the observations, within the budget.
func TestAgentTracesFlows(t *testing.T) {
	needRoot(t)
	port := openPort(t)
	a, base := loopbackAgent(t, `
name: lo1
class: pod
listen: 127.0.0.1:0
probing:
  interval: 100ms
  timeout: 500ms
  window: 10s
  flows: 3
  sourcePortBase: 62300
  maxTargets: 2
  protocols: [tcp_syn]
  trace: {budgetPerMinute: 60, maxTTL: 4}
targets:
  - {name: up, address: 127.0.0.1, class: node, port: `+itoa(port)+`}
`)
	deadline := time.Now().Add(10 * time.Second)
	for {
		obs := a.Observations()
		traced := 0
		for _, f := range flowsOf(obs) {
			if f.Path != nil {
				traced++
				if len(f.Path.Hops) != 1 || f.Path.Hops[0] != "127.0.0.1" || f.Path.Hash == "" || f.Path.SuspectHop != -1 {
					t.Fatalf("flow %d path %+v, want the one hop 127.0.0.1", f.SourcePort, f.Path)
				}
			}
		}
		if traced == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 flows traced after 10s", traced)
		}
		time.Sleep(200 * time.Millisecond)
	}
	metrics := get(t, base+"/metrics")
	if !strings.Contains(metrics, `prober_traceroutes_total{reason="new"} 3`) || !strings.Contains(metrics, "prober_path_changes_total 0") {
		t.Errorf("metrics:\n%s", grep(metrics, "prober_traceroutes_total"))
	}
}

func flowsOf(obs api.Observations) []api.Flow {
	if len(obs.Targets) == 0 || len(obs.Targets[0].Protocols) == 0 {
		return nil
	}
	return obs.Targets[0].Protocols[0].Flows
}

// TestKeepFirst: tick keeps only as many traces as it has tokens, the
// first in trace order (loss, new, then periodic by age), whatever order
// the flows come in.
func TestKeepFirst(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	job := func(name, reason string, ageSec int) traceJob {
		return traceJob{key: flowKey{target: targetKey{name: name}}, reason: reason, age: t0.Add(time.Duration(ageSec) * time.Second)}
	}
	in := []traceJob{
		job("p30", tracePeriodic, 30), job("n1", traceNew, 0), job("p10", tracePeriodic, 10),
		job("l1", traceLoss, 0), job("p20", tracePeriodic, 20), job("n2", traceNew, 0), job("l2", traceLoss, 0),
	}
	cases := []struct {
		n    int
		want string
	}{
		{1, "l1"},
		{3, "l1 l2 n1"},
		{5, "l1 l2 n1 n2 p10"},
		{10, "l1 l2 n1 n2 p10 p20 p30"},
	}
	for _, tc := range cases {
		var jobs []traceJob
		for _, j := range in {
			jobs = keepFirst(jobs, j, tc.n)
		}
		var got []string
		for _, j := range jobs {
			got = append(got, j.key.target.name)
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("n=%d: kept %q, want %q", tc.n, g, tc.want)
		}
	}
}
