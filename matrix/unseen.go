package matrix

import (
	"maps"
	"math"
)

// A silent fabric (a cloud VPC's routers, or any whose routers send no
// time exceeded) shows a trace nothing between its ends: round.trace
// marks such flows unseen and gives them no links, and the tier stage
// judges them from their totals. The rules still compare a host or a
// node's pods with their peers by totals, where a lossy spine that some
// flows hash through and others do not looks like a broken host: what
// the silent fabric's other flows lose is what it may explain.

// unseenCross holds the unseen flows between hosts of two known racks, as
// a histogram, and which flows they are.
type unseenCross struct {
	cross []bool // per flow
	all   flowCounts
}

// newUnseenCross is nil when no flow crossing racks is unseen.
func newUnseenCross(r *round, rackOf func(int32) string) *unseenCross {
	var u *unseenCross
	racks := map[int32]string{}
	rack := func(d int32) string {
		rk, ok := racks[d]
		if !ok {
			rk = rackOf(d)
			racks[d] = rk
		}
		return rk
	}
	for fi := range r.flows {
		f := &r.flows[fi]
		if !f.unseen {
			continue
		}
		rs, rd := rack(f.src), rack(f.dst)
		if rs == "" || rd == "" || rs == rd {
			continue
		}
		if u == nil {
			u = &unseenCross{cross: make([]bool, len(r.flows)), all: flowCounts{}}
		}
		u.cross[fi] = true
		u.all.add(f.sent, f.lost)
	}
	return u
}

// rate is the loss rate, in fabricExplains' terms (-log of the success
// ratio), that the other unseen cross-rack flows put on one of them: the
// rate of their lossy class (lossyShare) where they lose significantly,
// else 0. The flows of pairs are left out: they are what a rule blames.
func (u *unseenCross) rate(r *round, th *Thresholds, pairs []int32) float64 {
	fc := maps.Clone(u.all)
	for _, pi := range pairs {
		p := &r.pairs[pi]
		for fi := p.flowStart; fi < p.flowEnd; fi++ {
			if !u.cross[fi] {
				continue
			}
			f := &r.flows[fi]
			k := tally{sent: f.sent, lost: min(f.lost, f.sent)}
			if fc[k]--; fc[k] <= 0 {
				delete(fc, k)
			}
		}
	}
	var t tally
	for k, n := range fc {
		t.sent += k.sent * uint64(n)
		t.lost += k.lost * uint64(n)
	}
	if !th.isSignificant(t) {
		return 0
	}
	_, q := lossyShare(fc, th.Healthy)
	return -math.Log1p(-q)
}
