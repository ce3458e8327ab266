package matrix

import (
	"slices"
	"strings"
	"testing"

	"github.com/netprober/prober/api"
)

// TestVIPIsNoFabricDevice: a one-arm LB hanging off tor1 (lb1 in
// testHops), whose link from tor1 drops a tenth of the VIP's packets. A
// trace to a VIP hides what lies past it (the leg to the backend, the
// replies), so its flows feed no fabric estimate: no link of the round
// reaches the VIP, the estimator blames nothing near it, the LB is no
// tier above the ToRs, and the lb rule alone names it.
func TestVIPIsNoFabricDevice(t *testing.T) {
	t.Parallel()
	const vip = "203.0.113.201"
	reps := testReports(func(string, string, string, uint16) uint64 { return 0 }, false)
	for i := range reps {
		src := reps[i].Agent.Name
		tg := api.Target{Name: "vip-web", Address: vip, Class: "lb", Path: "node_to_lb", Protocols: []api.Protocol{{Protocol: "tcp_syn"}}}
		for f := range 4 {
			hops := []string{"192.0.2.1", vip}
			if src[0] == 'b' {
				hops = []string{"198.51.100.1", []string{"203.0.113.12", "203.0.113.22"}[f%2], "203.0.113.101", vip}
			}
			tg.Protocols[0].Flows = append(tg.Protocols[0].Flows, api.Flow{SourcePort: uint16(41000 + f),
				Stats: api.Stats{Sent: 50, Lost: 5}, Path: &api.FlowPath{Hops: hops, SuspectHop: -1}})
			tg.Protocols[0].Sent += 50
			tg.Protocols[0].Lost += 5
		}
		reps[i].Targets = append(reps[i].Targets, tg)
	}
	m, err := New(Config{GroupBy: "rack", Hops: testHops})
	must(t, err)
	for _, o := range reps {
		must(t, m.Observe(t0, o))
	}
	fresh, _ := m.fresh(t0)
	r, e := &m.loc.r, &m.loc.e
	m.build(r, fresh)
	e.fit(r)
	lb := r.devID["lb1"]
	for l, lk := range r.links {
		if lk.from == lb || lk.to == lb {
			t.Errorf("link %s: a trace to the VIP feeds the fabric estimate", r.linkName(int32(l)))
		}
	}
	for _, c := range fabricSuspects(r, e, &m.loc.s, &m.cfg.Thresholds, nil) {
		touches := c.dev == lb || strings.Contains(c.Name, "lb1")
		for _, l := range c.links {
			touches = touches || r.links[l].from == lb || r.links[l].to == lb
		}
		if touches {
			t.Errorf("estimator suspect %s/%s (%s) blames the VIP as fabric", c.Kind, c.Name, c.Evidence.Detail)
		}
	}
	if up := upperTier(r); !slices.Equal(up, []string{"s1", "s2"}) {
		t.Errorf("tier above the ToRs = %v, want [s1 s2]: an LB is no spine", up)
	}
	if d := m.Localize(t0); top(d) != "lb/lb1" {
		t.Errorf("top suspect = %s, want lb/lb1; all: %+v", top(d), d.Suspects)
	}
}
