package agent

import (
	"time"

	"github.com/netprober/prober/probe"
)

// An established-flow black hole is a device that drops the packets of
// connections already open while it lets new ones through: a load
// balancer that scaled out and lost its flow table, a conntrack table
// that was flushed (seed 001: kubelets hung for ~15 minutes on their
// HTTP/2 connections to the API server while telnet to the same LB
// worked). Every tcp_syn and icmp probe is a new flow, so only the
// long-lived http2_ping connection can see it, and only the difference
// between the two tells it from a plain outage.

// outcomeCounts counts probe outcomes.
type outcomeCounts struct{ OK, Lost, Refused int }

// blackholeEvidence is what a target's probes showed since its last
// answered PING.
type blackholeEvidence struct {
	// PingTimeout: the pinger declared a connection dead because its
	// PINGs went unanswered (reset reason ping_timeout).
	PingTimeout bool
	LostInRow   int // PINGs lost in a row, the last one included
	DeadAfter   int // probing.http2.deadAfter
	// Syn counts the tcp_syn probes (new flows) to the same target over
	// the same span.
	Syn outcomeCounts
}

// establishedBlackhole decides whether e shows an established-flow black
// hole: PINGs on an established connection died (the pinger declared it
// dead, or DeadAfter PINGs in a row were lost) while new flows to the
// same target were answered with SYN-ACKs, at most 1 in 10 lost or
// refused. An RST answer means a dead or closed backend, not a black
// hole (the pinger then sees reset or refused, not loss), and tcp_syn
// loss means the path loses every flow, new ones too. Without tcp_syn
// probes there is no evidence, so no black hole.
func establishedBlackhole(e blackholeEvidence) bool {
	if !e.PingTimeout && e.LostInRow < max(e.DeadAfter, 1) {
		return false
	}
	sent := e.Syn.OK + e.Syn.Lost + e.Syn.Refused
	return e.Syn.OK > 0 && 10*e.Syn.OK >= 9*sent
}

// synOutcomes counts t's tcp_syn results newer than since. The caller
// holds t.mu.
func (t *target) synOutcomes(since time.Time) outcomeCounts {
	var c outcomeCounts
	ps, ok := t.protos[probe.ProtocolTCPSYN]
	if !ok {
		return c
	}
	after := since.UnixNano()
	for _, w := range ps.flows {
		for i := 0; i < w.count; i++ {
			s := w.ring[(w.next-1-i+len(w.ring))%len(w.ring)]
			if s.at <= after {
				break
			}
			switch s.outcome {
			case probe.OK:
				c.OK++
			case probe.Lost:
				c.Lost++
			case probe.Refused:
				c.Refused++
			}
		}
	}
	return c
}

// blackhole reports whether an established-flow black hole to t is
// reported at now: from its detection until a window (probing.window)
// after the last connection it swallowed, so that a scrape and the
// observations' window see it although the pinger's redial (a new flow)
// got through at once. The caller holds t.mu.
func (t *target) blackhole(now time.Time) bool {
	return t.h2 != nil && now.Before(t.h2.blackholeUntil)
}

// newBlackholeCollector exports prober_established_flow_blackhole: any
// target of a path class with a black hole, without per-target labels.
func newBlackholeCollector(a *Agent, perTarget bool) *stateCollector {
	return newStateCollector(a, perTarget, false, "prober_established_flow_blackhole",
		"1 while PINGs on the long-lived HTTP/2 connection to a target died and new flows (tcp_syn) to it passed, within the last window; else 0.",
		func(t *target, now time.Time) (bool, bool) { return t.blackhole(now), t.h2 != nil })
}
