package matrix

import (
	"fmt"
	"testing"

	"github.com/netprober/prober/api"
)

// bigReport is one agent's report at 5,000 nodes: 163 targets (39 in its
// rack, 124 across), tcp_syn with 4 traced flows each, plus icmp totals.
func bigReport(agent string) api.Observations {
	obs := report(agent, "r0")
	for i := range 163 {
		t := target(fmt.Sprintf("n%d", i), fmt.Sprintf("r%d", i%125), 24, 0, 0.0004)
		t.Address = fmt.Sprintf("198.51.100.%d", i%250)
		tcp := &t.Protocols[0]
		for f := range 4 {
			tcp.Flows = append(tcp.Flows, api.Flow{
				SourcePort: uint16(40000 + f),
				Stats:      api.Stats{Sent: 6},
				Path: &api.FlowPath{
					Hops:       []string{"192.0.2.1", fmt.Sprintf("192.0.2.%d", 10+f), fmt.Sprintf("203.0.113.%d", i%125), t.Address},
					SuspectHop: -1,
				},
			})
		}
		t.Protocols = append(t.Protocols, api.Protocol{Protocol: "icmp", Stats: api.Stats{Sent: 6}})
		obs.Targets = append(obs.Targets, t)
	}
	return obs
}

func TestObserveAllocatesNothingInSteadyState(t *testing.T) {
	m, _ := New(Config{GroupBy: "rack"})
	obs := bigReport("a1")
	must(t, m.Observe(t0, obs))
	allocs := testing.AllocsPerRun(100, func() {
		if err := m.Observe(t0, obs); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Observe allocates %v times per call in steady state, want 0", allocs)
	}
}

func BenchmarkObserve(b *testing.B) {
	m, _ := New(Config{GroupBy: "rack"})
	obs := bigReport("a1")
	must(b, m.Observe(t0, obs))
	b.ReportAllocs()
	for b.Loop() {
		if err := m.Observe(t0, obs); err != nil {
			b.Fatal(err)
		}
	}
}
