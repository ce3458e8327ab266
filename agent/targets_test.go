package agent

import (
	"testing"
	"time"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/config"
	"github.com/netprober/prober/probe"
)

// TestLBFlowSettle: each flow of a new lb target counts from its own first
// answer (a flow whose first SYN beat kube-proxy's rules follows a
// conntrack entry without DNAT while the others pass), or once the settle
// time has passed.
func TestLBFlowSettle(t *testing.T) {
	a, _ := loopbackAgent(t, "name: a1\nclass: node\nlisten: 127.0.0.1:0\nprobing: {protocols: [http2_ping]}\n")
	a.lbSettle = time.Hour
	proto := probe.ProtocolTCPSYN
	ps := &protoState{series: a.m.seriesFor(proto, "node_to_lb", api.FamilyIPv4, "vip"), live: make([]bool, 2),
		flows: []*window{newWindow(time.Minute, time.Second), newWindow(time.Minute, time.Second)}}
	tg := &target{Target: Target{Name: "vip", Class: config.ClassLB}, path: "node_to_lb", added: a.now(),
		protos: map[probe.Protocol]*protoState{proto: ps}}
	sent := func(flow int) uint64 {
		st, _ := ps.flows[flow].stats(time.Time{}, nil)
		return st.Sent
	}
	a.record(tg, proto, 0, probe.Result{Outcome: probe.OK, RTT: time.Millisecond})
	a.record(tg, proto, 1, probe.Result{Outcome: probe.Lost})
	a.record(tg, proto, 0, probe.Result{Outcome: probe.Lost})
	if sent(0) != 2 || sent(1) != 0 {
		t.Errorf("flow 0 answered then lost: %d counted, want 2; flow 1 never answered: %d counted, want 0", sent(0), sent(1))
	}
	a.lbSettle = 0
	a.record(tg, proto, 1, probe.Result{Outcome: probe.Lost})
	if sent(1) != 1 {
		t.Errorf("after the settle time flow 1 counted %d, want 1", sent(1))
	}
}
