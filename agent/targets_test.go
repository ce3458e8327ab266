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

// TestEchoNotAnswering: a target that has never answered ICMP echo (a host
// firewall drops it) reports no echo data, not loss; from its first
// answer its echoes count; once another protocol has answered it for
// longer than a window after echo last did, it is not answering again.
// A target that stops answering everything stays loss.
func TestEchoNotAnswering(t *testing.T) {
	a, _ := loopbackAgent(t, "name: a1\nclass: node\nlisten: 127.0.0.1:0\nprobing: {protocols: [icmp, tcp_syn], window: 30s}\n")
	now := time.Unix(1e9, 0)
	a.now = func() time.Time { return now }
	icmp, syn := probe.ProtocolICMP, probe.ProtocolTCPSYN
	state := func(proto probe.Protocol) *protoState {
		return &protoState{series: a.m.seriesFor(proto, api.PathNodeToNode, api.FamilyIPv4, "n2"), live: make([]bool, 1),
			flows: []*window{newWindow(30*time.Second, time.Second)}}
	}
	tg := &target{Target: Target{Name: "n2", Class: config.ClassNode}, path: api.PathNodeToNode, added: now, ports: []uint16{40000},
		protos: map[probe.Protocol]*protoState{icmp: state(icmp), syn: state(syn)}}
	a.mu.Lock()
	a.targets = map[targetKey]*target{tg.key(): tg}
	a.mu.Unlock()
	t.Cleanup(func() { // not a started target: the agent must not stop it
		a.mu.Lock()
		a.targets = map[targetKey]*target{}
		a.mu.Unlock()
	})
	echo := func() api.Protocol {
		t.Helper()
		for _, tr := range a.Observations().Targets {
			for _, p := range tr.Protocols {
				if p.Protocol == string(icmp) {
					return p
				}
			}
		}
		t.Fatal("no icmp in the report")
		return api.Protocol{}
	}
	step := func(echoOutcome probe.Outcome, synOutcome probe.Outcome) {
		now = now.Add(time.Second)
		a.record(tg, icmp, 0, probe.Result{Outcome: echoOutcome, RTT: time.Millisecond})
		a.record(tg, syn, 0, probe.Result{Outcome: synOutcome, RTT: time.Millisecond})
	}

	for range 10 {
		step(probe.Lost, probe.OK)
	}
	if p := echo(); !p.NotAnswering || p.Sent != 0 || p.Lost != 0 {
		t.Fatalf("never answered echo: %+v, want not answering and no data", p)
	}
	step(probe.OK, probe.OK)
	step(probe.Lost, probe.OK)
	if p := echo(); p.NotAnswering || p.Sent != 2 || p.Lost != 1 {
		t.Fatalf("answered once, then lost one: %+v, want answering, 2 sent, 1 lost", p)
	}
	// Cut off: nothing answers. Echo loss goes on counting.
	for range 40 {
		step(probe.Lost, probe.Lost)
	}
	if p := echo(); p.NotAnswering || p.Lost == 0 || p.Lost != p.Sent {
		t.Fatalf("a target that answers nothing: %+v, want its echoes all lost", p)
	}
	// A firewall rule added: tcp_syn answers, echo not, for over a window.
	for range 31 {
		step(probe.Lost, probe.OK)
	}
	if p := echo(); !p.NotAnswering || p.Sent != 0 {
		t.Fatalf("echo silent a window past tcp_syn's answers: %+v, want not answering", p)
	}
	// Echo answers again: what it lost before is history.
	step(probe.OK, probe.OK)
	if p := echo(); p.NotAnswering || p.Sent != 1 || p.Lost != 0 {
		t.Fatalf("answering again: %+v, want 1 sent, 0 lost", p)
	}
}
