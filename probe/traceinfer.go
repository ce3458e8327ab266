package probe

import (
	"net/netip"
	"slices"
	"sync"
)

// Routers answer a burst of 6 Time Exceeded and then one a second per
// destination (Linux's net.ipv4.icmp_ratelimit; switches police their
// control plane alike), so when many flows cross one spine most of them
// find it silent at first. Waiting for every flow's every hop is what made
// seed 004's traceroute loop take a minute and a half. But flows traced
// together to one target cross the same few devices, and a router that
// answers from the interface the probe came in on (Linux with
// icmp_errors_use_inbound_ifaddr, and most switches) names the link, not
// only the device: the far ToR's address on its link from spine 2 says
// the flow crossed spine 2. inferHops uses what the other flows of a trace
// heard to fill a flow's silent hops when the answer can only be one
// address, and Trace stops re-probing a flow once none of its hops is in
// doubt.

// inferHops fills silent hops of flows traced together. paths[i][t] is
// the address that answered flow i at TTL t+1, the zero Addr for a silent
// hop; only intermediate hops, not the destination. It returns, for each
// flow, the addresses inferred for its silent hops (zero where none can
// be). Links (a at TTL t, b at TTL t+1) are learnt from flows where both
// answered, and a silent hop is filled:
//
//   - backwards, from the hop after it: b was only ever seen after a. A
//     router that answers from its inbound interface names the link, and
//     a link has one device before it. Not when every answer at t+1 came
//     from one address while several answered at t: that router answers
//     from one address (a loopback) whatever the link.
//   - forwards, from the hop before it: a and b were only ever seen
//     together (a one-to-one link), several addresses answered at t-1 and
//     no more at t. This fills the far ToR of a flow whose spine answered
//     (parallel lanes), and never the hop after a single device, where
//     ECMP fans out and the hop is the very thing in doubt: a flow whose
//     spine dropped everything must not be given the spine the other
//     flows took.
//
// Filled hops may chain (two silent hops before a known one). A hop the
// two directions would fill differently stays silent. Learning only from
// answered hops keeps one wrong guess from spreading.
func inferHops(paths [][]netip.Addr) [][]netip.Addr {
	depth := 0
	for _, p := range paths {
		depth = max(depth, len(p))
	}
	seen := make([]map[netip.Addr]bool, depth)
	// after[t][b]: the addresses seen at t before b at t+1; before[t][a]:
	// those seen at t+1 after a at t.
	after := make([]map[netip.Addr]map[netip.Addr]bool, depth)
	before := make([]map[netip.Addr]map[netip.Addr]bool, depth)
	for t := range depth {
		seen[t], after[t], before[t] = map[netip.Addr]bool{}, map[netip.Addr]map[netip.Addr]bool{}, map[netip.Addr]map[netip.Addr]bool{}
	}
	link := func(m map[netip.Addr]map[netip.Addr]bool, k, v netip.Addr) {
		if m[k] == nil {
			m[k] = map[netip.Addr]bool{}
		}
		m[k][v] = true
	}
	for _, p := range paths {
		for t, a := range p {
			if !a.IsValid() {
				continue
			}
			seen[t][a] = true
			if t+1 < len(p) && p[t+1].IsValid() {
				link(after[t], p[t+1], a)
				link(before[t], a, p[t+1])
			}
		}
	}
	only := func(set map[netip.Addr]bool) netip.Addr {
		if len(set) != 1 {
			return netip.Addr{}
		}
		for a := range set {
			return a
		}
		return netip.Addr{}
	}

	out := make([][]netip.Addr, len(paths))
	for i, p := range paths {
		out[i] = make([]netip.Addr, len(p))
		known := func(t int) netip.Addr {
			if p[t].IsValid() {
				return p[t]
			}
			return out[i][t]
		}
		for changed := true; changed; {
			changed = false
			for t := range p {
				if p[t].IsValid() || out[i][t].IsValid() {
					continue
				}
				var back, fwd netip.Addr
				if t+1 < len(p) && (len(seen[t+1]) > 1 || len(seen[t]) <= 1) {
					if b := known(t + 1); b.IsValid() {
						back = only(after[t][b])
					}
				}
				if t > 0 && len(seen[t-1]) >= 2 && len(seen[t]) <= len(seen[t-1]) {
					if a := known(t - 1); a.IsValid() {
						if b := only(before[t-1][a]); b.IsValid() && only(after[t-1][b]) == a {
							fwd = b
						}
					}
				}
				got := back
				switch {
				case !back.IsValid():
					got = fwd
				case fwd.IsValid() && fwd != back:
					got = netip.Addr{}
				}
				if got.IsValid() {
					out[i][t], changed = got, true
				}
			}
		}
	}
	return out
}

// traceGroup is the flows of one Trace call, for reprobe.
type traceGroup struct {
	mu   sync.Mutex
	runs []*flowRun // by index in the call; nil until the flow starts
}

// heard returns what every flow of the group has heard so far, as
// inferHops takes it.
func (g *traceGroup) heard() [][]netip.Addr {
	g.mu.Lock()
	runs := slices.Clone(g.runs)
	g.mu.Unlock()
	out := make([][]netip.Addr, len(runs))
	for i, fr := range runs {
		if fr != nil {
			out[i] = fr.result().answeredHops()
		}
	}
	return out
}

// reprobe returns the TTLs flow i (fr) should probe again. Its hops in
// doubt are the silent ones that the flows traced with it cannot fill
// (inferHops), except, after the first retry, at a TTL where no flow
// heard anything: a device that never answers, which waiting will not
// change. Those are re-probed, with the silent hops next to them, whose
// answers may settle them. Nothing while the flow's end is unknown.
func (g *traceGroup) reprobe(i int, fr *flowRun, firstRetry bool) []int {
	end := fr.end()
	if end <= 1 {
		return nil
	}
	paths := g.heard()
	filled := inferHops(paths)
	mine := paths[i]
	heard := make([]bool, len(mine))
	for _, p := range paths {
		for t, a := range p[:min(len(p), len(mine))] {
			heard[t] = heard[t] || a.IsValid()
		}
	}
	silent := func(t int) bool { return t >= 0 && t < len(mine) && !mine[t].IsValid() }
	var ttls []int
	for t := range mine {
		inDoubt := func(t int) bool {
			return silent(t) && !filled[i][t].IsValid() && (heard[t] || firstRetry)
		}
		if silent(t) && (inDoubt(t-1) || inDoubt(t) || inDoubt(t+1)) {
			ttls = append(ttls, t+1)
		}
	}
	return ttls
}

// answeredHops returns the address that answered each intermediate hop of
// f, the zero Addr where none did (an inferred hop included).
func (f FlowTrace) answeredHops() []netip.Addr {
	hops := f.Hops
	if n := len(hops); n > 0 && (hops[n-1].Destination || hops[n-1].Unreachable) {
		hops = hops[:n-1]
	}
	out := make([]netip.Addr, len(hops))
	for t, h := range hops {
		if h.Received > 0 {
			out[t] = h.Addr
		}
	}
	return out
}

// fillInferred sets the silent hops of fts that inferHops can fill.
func fillInferred(fts []FlowTrace) {
	paths := make([][]netip.Addr, len(fts))
	for i, f := range fts {
		paths[i] = f.answeredHops()
	}
	for i, fill := range inferHops(paths) {
		for t, a := range fill {
			if a.IsValid() {
				fts[i].Hops[t].Addr, fts[i].Hops[t].Inferred = a, true
			}
		}
	}
}
