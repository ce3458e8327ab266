package matrix

import (
	"testing"

	"github.com/netprober/prober/api"
)

// tracedTarget is a target probed by tcp_syn over two flows, each traced
// along hops.
func tracedTarget(name, addr, class, path string, hops ...string) api.Target {
	t := api.Target{Name: name, Address: addr, Class: class, Path: path, Protocols: []api.Protocol{{Protocol: "tcp_syn"}}}
	for f := range 2 {
		t.Protocols[0].Flows = append(t.Protocols[0].Flows, api.Flow{SourcePort: uint16(40000 + f), Stats: api.Stats{Sent: 10},
			Path: &api.FlowPath{Hops: hops, SuspectHop: -1}})
		t.Protocols[0].Sent += 10
	}
	return t
}

// TestOneHopTraceHasNoEntry: a trace whose target answers at the first
// hop (a flat network; a ClusterIP that kube-proxy DNATs on the source
// node) meets no device. Its target is not the source's access device,
// nor the flow's entry, and a VIP never is, first hop or not.
func TestOneHopTraceHasNoEntry(t *testing.T) {
	t.Parallel()
	const vip = "192.0.2.200" // no Hops entry: no device at a ClusterIP
	svc := func(hops ...string) api.Target {
		return tracedTarget("default/kubernetes", vip, "lb", "node_to_lb", hops...)
	}
	node := func(name string, hops ...string) api.Target {
		return tracedTarget(name, hostAddr(name), "node", "node_to_node", hops...)
	}
	agent := func(name string, targets ...api.Target) api.Observations {
		return api.Observations{SchemaVersion: api.SchemaVersion, Time: t0, WindowSeconds: 60,
			Agent: api.Agent{Name: name, Class: "node", Address: hostAddr(name)}, Targets: targets}
	}
	reps := []api.Observations{
		// Flat: a1 lists the nodes first, a2 the Service first. a3 does
		// not report; the others reach it in one hop.
		agent("a1", node("a2", hostAddr("a2")), node("a3", hostAddr("a3")), svc(vip)),
		agent("a2", svc(vip), node("a1", hostAddr("a1")), node("a3", hostAddr("a3"))),
		// Routed: b1 is behind tor2, and its trace to the Service passes
		// the fabric before the ClusterIP answers.
		agent("b1", svc("198.51.100.1", "203.0.113.12", "203.0.113.101", vip), node("a1", "198.51.100.1", "203.0.113.12", "203.0.113.101", hostAddr("a1"))),
	}
	m, err := New(Config{Hops: testHops})
	must(t, err)
	for _, o := range reps {
		must(t, m.Observe(t0, o))
	}
	fresh, _ := m.fresh(t0)
	r := &m.loc.r
	m.build(r, fresh)
	dev := func(name string) int32 {
		d, ok := r.devID[name]
		if !ok {
			t.Fatalf("no device %s", name)
		}
		return d
	}
	for _, a := range []string{"a1", "a2"} {
		if acc := r.devAcc[dev(a)]; acc != accNone {
			t.Errorf("access device of %s = %s, want none: its traces reach their targets at the first hop", a, r.nameOr(acc))
		}
	}
	if acc := r.devAcc[dev("a3")]; acc != -1 {
		t.Errorf("access device of silent a3 = %s, want unknown: no trace met a device before it", r.nameOr(acc))
	}
	if acc := r.devAcc[dev("b1")]; acc != dev("tor2") {
		t.Errorf("access device of b1 = %s, want tor2", r.nameOr(acc))
	}
	vipDev := dev("default/kubernetes")
	if !r.devLB[vipDev] {
		t.Errorf("default/kubernetes is not marked a VIP")
	}
	for _, f := range r.flows {
		src := r.devName[f.src]
		switch {
		case src != "b1" && f.entry != -1:
			t.Errorf("flow %s->%s enters the fabric at %s, want nowhere", src, r.devName[f.dst], r.nameOr(f.entry))
		case src == "b1" && f.entry != dev("tor2"):
			t.Errorf("flow b1->%s enters the fabric at %s, want tor2", r.devName[f.dst], r.nameOr(f.entry))
		}
	}
	for d, acc := range r.devAcc {
		if acc == vipDev || r.devExit[d] == vipDev {
			t.Errorf("%s reached through the VIP (access %s, exit %s)", r.devName[d], r.nameOr(acc), r.nameOr(r.devExit[d]))
		}
	}
	for k := range r.mixID {
		if entry, exit := int32(k>>32), int32(uint32(k)); entry == vipDev || exit == vipDev {
			t.Errorf("mixture %s..%s has the VIP at an end", r.nameOr(entry), r.nameOr(exit))
		}
	}
}

// nameOr names device d, or says what its negative value means.
func (r *round) nameOr(d int32) string {
	switch {
	case d == accNone:
		return "none"
	case d < 0:
		return "unknown"
	}
	return r.devName[d]
}

// TestRackMateFlowCrossesItsToR: in racks that switch their own traffic
// at L2 and route the rest (the lab's ToRs: a bridge that is also the
// rack's router), a trace to a rack-mate shows one hop while a trace to
// another rack shows the ToR. The probes to the rack-mate and their
// replies still cross the ToR and both hosts' links to it: a lossy ToR
// drops them (seen on the lab cluster), so the flow's path is a1->tor1,
// tor1->a2 and its replies come back up a2->tor1, not a link of their
// own between the two hosts.
func TestRackMateFlowCrossesItsToR(t *testing.T) {
	t.Parallel()
	node := func(name string, hops ...string) api.Target {
		return tracedTarget(name, hostAddr(name), "node", "node_to_node", hops...)
	}
	agent := func(name string, targets ...api.Target) api.Observations {
		return api.Observations{SchemaVersion: api.SchemaVersion, Time: t0, WindowSeconds: 60,
			Agent: api.Agent{Name: name, Class: "node", Address: hostAddr(name)}, Targets: targets}
	}
	toB1 := []string{"192.0.2.1", "203.0.113.11", "203.0.113.102", hostAddr("b1")}
	reps := []api.Observations{
		agent("a1", node("b1", toB1...), node("a2", hostAddr("a2"))),
		agent("a2", node("b1", toB1...)),
		agent("b1", node("a1", "198.51.100.1", "203.0.113.12", "203.0.113.101", hostAddr("a1"))),
	}
	m, err := New(Config{Hops: testHops})
	must(t, err)
	for _, o := range reps {
		must(t, m.Observe(t0, o))
	}
	fresh, _ := m.fresh(t0)
	r, e := &m.loc.r, &m.loc.e
	m.build(r, fresh)
	e.fit(r)
	a1, a2, tor1 := r.devID["a1"], r.devID["a2"], r.devID["tor1"]
	if r.devAcc[a2] != tor1 || r.devAcc[a1] != tor1 {
		t.Fatalf("access devices of a1, a2 = %s, %s, want tor1", r.nameOr(r.devAcc[a1]), r.nameOr(r.devAcc[a2]))
	}
	probes := func(from, to int32) float64 {
		if l := r.lookupLink(from, to); l >= 0 {
			return e.sent[l]
		}
		return 0
	}
	// Each flow is 2 x 10 probes.
	for _, tc := range []struct {
		from, to int32
		want     float64
	}{
		{a1, tor1, 60}, // a1's flows to b1 and to a2, the replies to b1's
		{tor1, a2, 40}, // a1's flows to a2, the replies to a2's to b1
		{a2, tor1, 40}, // a2's flows to b1, the replies to a1's to a2
		{tor1, a1, 60}, // b1's flows to a1, the replies to a1's
		{a1, a2, 0},
	} {
		if got := probes(tc.from, tc.to); got != tc.want {
			t.Errorf("probes through %s->%s = %v, want %v", r.devName[tc.from], r.devName[tc.to], got, tc.want)
		}
	}
}
