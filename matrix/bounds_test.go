package matrix

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/netprober/prober/api"
)

// A report beyond api's bounds is refused with the field named, and the
// agent's previous report stays.
func TestObserveRefusesOversizedReports(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", api.MaxString+1)
	flows := func(n int) []api.Flow { return make([]api.Flow, n) }
	labels := map[string]string{}
	for i := range api.MaxLabels + 1 {
		labels[fmt.Sprint(i)] = "v"
	}
	for _, tc := range []struct {
		field string
		edit  func(o *api.Observations)
	}{
		{"agent:", func(o *api.Observations) { o.Agent.Address = long }},
		{"agent.labels:", func(o *api.Observations) { o.Agent.Labels = labels }},
		{"agent.labels:", func(o *api.Observations) { o.Agent.Labels = map[string]string{long: "v"} }},
		{"agent.class:", func(o *api.Observations) { o.Agent.Class = "lb" }},
		{"targets:", func(o *api.Observations) {
			o.Targets = make([]api.Target, api.MaxReportTargets+1)
		}},
		{"targets[1]:", func(o *api.Observations) { o.Targets[1].Name = long }},
		{"targets[1]:", func(o *api.Observations) { o.Targets[1].Path = "node_to_pod" }},
		{"targets[0].labels:", func(o *api.Observations) { o.Targets[0].Labels = labels }},
		{"targets[0].backends:", func(o *api.Observations) { o.Targets[0].Backends = []string{"n1", long} }},
		{"targets[0].protocols:", func(o *api.Observations) {
			o.Targets[0].Protocols = make([]api.Protocol, len(api.Protocols)+1)
		}},
		{"targets[0].protocols[0].protocol:", func(o *api.Observations) { o.Targets[0].Protocols[0].Protocol = "udp" }},
		{"targets[0].protocols[0].flows:", func(o *api.Observations) { o.Targets[0].Protocols[0].Flows = flows(api.MaxFlows + 1) }},
		{"targets[0].protocols[0].flows[1].path.hops[2]:", func(o *api.Observations) {
			o.Targets[0].Protocols[0].Flows = flows(2)
			o.Targets[0].Protocols[0].Flows[1].Path = &api.FlowPath{Hops: []string{"", "192.0.2.1", long[:46]}}
		}},
		{"path: the report's traced hops exceed", func(o *api.Observations) {
			hops := make([]string, api.MaxHops)
			o.Targets = make([]api.Target, api.MaxReportHops/api.MaxHops/api.MaxFlows+1)
			for i := range o.Targets {
				o.Targets[i] = target(fmt.Sprint("n", i), "r1", 1, 0, 0)
				o.Targets[i].Protocols[0].Flows = flows(api.MaxFlows)
				for k := range o.Targets[i].Protocols[0].Flows {
					o.Targets[i].Protocols[0].Flows[k].Path = &api.FlowPath{Hops: hops}
				}
			}
		}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			m, _ := New(Config{GroupBy: "rack"})
			good := report("a1", "r1", target("n1", "r2", 100, 0, 0.001), target("n2", "r2", 100, 0, 0.001))
			must(t, m.Observe(t0, good))
			bad := report("a1", "r1", target("n1", "r2", 100, 50, 0.001), target("n2", "r2", 100, 50, 0.001))
			tc.edit(&bad)
			err := m.Observe(t0, bad)
			if err == nil || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("got %v, want an error naming %s", err, tc.field)
			}
			if len(err.Error()) > 400 {
				t.Errorf("the error quotes the bad value: %d bytes", len(err.Error()))
			}
			for _, c := range m.Snapshot(t0).Groups {
				if c.Lost != 0 {
					t.Errorf("the refused report replaced the good one: %+v", c)
				}
			}
		})
	}
}

// Counts and seconds are clamped: a report of 2^64-1 probes or an RTT of
// +Inf neither wraps a sum nor makes the matrix unencodable.
func TestObserveClampsNumbers(t *testing.T) {
	t.Parallel()
	m, _ := New(Config{GroupBy: "rack"})
	huge := target("n1", "r2", math.MaxUint64, math.MaxUint64, math.Inf(1))
	huge.Protocols[0].RTTP99 = math.NaN()
	huge.Protocols[0].Flows = []api.Flow{{Stats: api.Stats{Sent: math.MaxUint64, Lost: 1}}, {Stats: api.Stats{Sent: math.MaxUint64, Lost: 1}}}
	neg := target("n2", "r2", 10, 0, -5)
	must(t, m.Observe(t0, report("a1", "r1", huge, neg)))
	must(t, m.Observe(t0, report("a2", "r1", target("n1", "r2", math.MaxUint64, 0, 1e308))))
	must(t, m.Observe(t0, report("a3", "r3", target("n1", "r2", 1, 7, 1e-3))))
	s := m.Snapshot(t0)
	if _, err := json.Marshal(s); err != nil {
		t.Fatalf("the snapshot does not encode: %v", err)
	}
	if _, err := json.Marshal(m.Localize(t0)); err != nil {
		t.Fatalf("the diagnosis does not encode: %v", err)
	}
	for _, c := range append(s.Groups, s.Worst...) {
		if c.LossRatio < 0 || c.LossRatio > 1 || c.Lost > c.Sent || c.Sent > 3*api.MaxCount {
			t.Errorf("cell %s->%s: sent %d lost %d ratio %v", c.Source, c.Target, c.Sent, c.Lost, c.LossRatio)
		}
		if c.RTTP50 < 0 || c.RTTP99 < 0 || c.RTTP50 > api.MaxSeconds || c.RTTP99 > api.MaxSeconds {
			t.Errorf("cell %s->%s: rtt %v %v", c.Source, c.Target, c.RTTP50, c.RTTP99)
		}
	}
}

// A peer reporting never-seen hop addresses every round leaves the hop
// table bounded, and the other agents' paths keep their addresses.
func TestHopTableBounded(t *testing.T) {
	t.Parallel()
	m, _ := New(Config{GroupBy: "rack"})
	honest := target("n1", "r2", 100, 0, 0.001)
	honest.Protocols[0].Flows = []api.Flow{{SourcePort: 1, Stats: api.Stats{Sent: 100},
		Path: &api.FlowPath{Hops: []string{"192.0.2.1", "", "192.0.2.3", "198.51.100.1"}, SuspectHop: -1}}}
	most := 0
	for round := range 300 {
		must(t, m.Observe(t0, report("a1", "r1", honest)))
		rogue := target("n9", "r2", 100, 0, 0.001)
		for f := range api.MaxFlows {
			hops := make([]string, 4)
			for h := range hops {
				hops[h] = fmt.Sprintf("203.0.%d.%d", (round*api.MaxFlows*4+f*4+h)/256%256, (f*4+h)%256)
			}
			hops[0] = fmt.Sprintf("10.%d.%d.%d", round/256, round%256, f)
			rogue.Protocols[0].Flows = append(rogue.Protocols[0].Flows, api.Flow{SourcePort: uint16(f), Path: &api.FlowPath{Hops: hops}})
		}
		must(t, m.Observe(t0, report("rogue", "r1", rogue)))
		most = max(most, len(m.addrs))
	}
	// 300 rounds of 64 new addresses: 19,200 seen, about 260 held.
	if most > 2*minCompact {
		t.Errorf("the hop table grew to %d addresses, want at most %d", most, 2*minCompact)
	}
	a := m.agents["a1"]
	var got []string
	for _, h := range a.hops {
		if h < 0 {
			got = append(got, "")
		} else {
			got = append(got, m.addrs[h])
		}
	}
	if want := honest.Protocols[0].Flows[0].Path.Hops; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Errorf("after compaction the honest agent's path reads %q, want %q", got, want)
	}
	// And the ids an unchanged report reuses (hopPrev) still resolve.
	must(t, m.Observe(t0, report("a1", "r1", honest)))
	for i, h := range m.agents["a1"].hops {
		if want := honest.Protocols[0].Flows[0].Path.Hops[i]; (h < 0) != (want == "") || h >= 0 && m.addrs[h] != want {
			t.Errorf("hop %d: id %d", i, h)
		}
	}
}

// A report bringing more new hop addresses than api.MaxNewAddrs is
// refused, and that agent's reports leave; the others stay.
func TestObserveRefusesAddressFlood(t *testing.T) {
	t.Parallel()
	m, _ := New(Config{GroupBy: "rack"})
	must(t, m.Observe(t0, report("a1", "r1", target("n1", "r2", 100, 0, 0.001))))
	flood := target("n1", "r2", 100, 0, 0.001)
	for f := range api.MaxFlows {
		hops := make([]string, api.MaxHops)
		for h := range hops {
			hops[h] = fmt.Sprintf("10.0.%d.%d", f, h)
		}
		flood.Protocols[0].Flows = append(flood.Protocols[0].Flows, api.Flow{SourcePort: uint16(f), Path: &api.FlowPath{Hops: hops}})
	}
	// 64 x 64 = 4,096 new addresses: at the bound, accepted.
	must(t, m.Observe(t0, report("rogue", "r1", flood)))
	flood.Protocols[0].Flows[0].Path.Hops = append([]string{"10.1.0.1"}, flood.Protocols[0].Flows[0].Path.Hops[:api.MaxHops-1]...)
	for f := range flood.Protocols[0].Flows {
		for h := range flood.Protocols[0].Flows[f].Path.Hops {
			flood.Protocols[0].Flows[f].Path.Hops[h] = fmt.Sprintf("10.2.%d.%d", f, h)
		}
	}
	flood.Protocols = append(flood.Protocols, api.Protocol{Protocol: api.ProtocolICMP,
		Flows: []api.Flow{{Path: &api.FlowPath{Hops: []string{"10.3.0.1"}}}}})
	err := m.Observe(t0, report("rogue", "r1", flood))
	if err == nil || !strings.Contains(err.Error(), "new to the matrix") {
		t.Fatalf("4,097 new addresses: %v, want refused", err)
	}
	if _, ok := m.agents["rogue"]; ok {
		t.Error("the flooding agent's reports stayed")
	}
	if _, ok := m.agents["a1"]; !ok {
		t.Error("another agent's report left")
	}
	if len(m.addrs) > 2*api.MaxNewAddrs+1 {
		t.Errorf("%d addresses held after the flood", len(m.addrs))
	}
}
