package matrix

import "math"

// A silent fabric (a cloud VPC's routers, or any whose routers send no
// time exceeded) shows a trace nothing between its ends: round.trace
// marks such flows unseen and gives them no links, and the tier stage
// judges them from their totals. The rules still compare a host or a
// node's pods with their peers by totals, where a lossy spine that some
// flows hash through and others do not looks like a broken host: what
// the silent fabric's other flows lose is what it may explain.

// unseenCross holds the unseen flows between hosts of two known racks:
// which flows they are, and their racks.
type unseenCross struct {
	racks [][2]int32 // per flow: its ends' racks, or -1 when not one
}

// newUnseenCross is nil when no flow crossing racks is unseen.
func newUnseenCross(r *round, rackOf func(int32) string) *unseenCross {
	var u *unseenCross
	ids := map[string]int32{}
	racks := map[int32]int32{}
	rack := func(d int32) int32 {
		q, ok := racks[d]
		if !ok {
			q = -1
			if name := rackOf(d); name != "" {
				if q, ok = ids[name]; !ok {
					q = int32(len(ids))
					ids[name] = q
				}
			}
			racks[d] = q
		}
		return q
	}
	for fi := range r.flows {
		f := &r.flows[fi]
		if !f.unseen {
			continue
		}
		rs, rd := rack(f.src), rack(f.dst)
		if rs < 0 || rd < 0 || rs == rd {
			continue
		}
		if u == nil {
			u = &unseenCross{racks: make([][2]int32, len(r.flows))}
			for i := range u.racks {
				u.racks[i] = [2]int32{-1, -1}
			}
		}
		u.racks[fi] = [2]int32{rs, rd}
	}
	return u
}

func (u *unseenCross) cross(fi int32) bool { return u.racks[fi][0] >= 0 }

// rate is the loss rate, in fabricExplains' terms (-log of the success
// ratio), that the other unseen cross-rack flows of the rack pairs' flows
// all touch (a host's or a node's pods': their rack) put on one of
// them: the rate of their lossy class (lossyShare) where they lose
// significantly, by probes or by sick flows, else 0. A rack's lossy
// uplink shows in its other flows, not in the fabric's as a whole. The
// flows of pairs are left out: they are what a rule blames; and so is
// every flow to or from what own says is the suspect's (a host's pods,
// whose flows cross its NIC: on an overlay cluster a broken NIC's pod
// flows made the "fabric's" lossy class, which then explained the NIC).
func (u *unseenCross) rate(r *round, th *Thresholds, pairs []int32, own func(int32) bool) float64 {
	mine := map[int32]bool{}
	touch := map[int32]int{}
	n := 0
	for _, pi := range pairs {
		p := &r.pairs[pi]
		for fi := p.flowStart; fi < p.flowEnd; fi++ {
			mine[fi] = true
			if !u.cross(fi) {
				continue
			}
			n++
			touch[u.racks[fi][0]]++
			touch[u.racks[fi][1]]++
		}
	}
	common := int32(-1)
	for q, k := range touch {
		if k == n && (common < 0 || q < common) {
			common = q
		}
	}
	fc := flowCounts{}
	for fi := range u.racks {
		k := u.racks[fi]
		if k[0] < 0 || mine[int32(fi)] || common >= 0 && k[0] != common && k[1] != common {
			continue
		}
		if f := &r.flows[fi]; own(f.src) || own(f.dst) {
			continue
		}
		fc.add(r.flows[fi].sent, r.flows[fi].lost)
	}
	var t tally
	var ft flowTally
	limits := sickLimits{h: th.Healthy}
	for _, k := range fc.keys() {
		n := uint64(fc[k])
		t.sent += k.sent * n
		t.lost += k.lost * n
		ft.count(&limits, k.sent, k.lost, n)
	}
	// By probes, or by sick flows where ECMP dilutes one bad path's loss
	// (tierSuspects).
	if sick, _ := th.sickFlows(ft, 0); !th.isSignificant(t) && !sick {
		return 0
	}
	_, q := lossyShare(fc, th.Healthy)
	return -math.Log1p(-q)
}
