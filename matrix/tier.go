package matrix

import (
	"fmt"
	"slices"
)

// tierSuspects is Pingmesh's rule over every pair, traced or not: a node
// is symptomatic when its own paths out are significantly lossy (pairs
// to excluded devices, already explained by a rule, left out); a rack is
// symptomatic when at least RackShare of its nodes (and two or more) are;
// nodes of no known rack are left out.
// Some racks symptomatic blames those racks' ToRs; every rack (at least
// two) blames the tier above them, which the matrix alone cannot narrow
// to a device: traced paths can.
func tierSuspects(r *round, th *Thresholds, rackOf func(int32) string, excluded map[int32]bool) []candidate {
	type node struct{ t tally }
	type rack struct {
		nodes, sick int
		t           tally
		sickNames   []string
	}
	nodes := map[int32]*tally{}
	for pi := range r.pairs {
		p := &r.pairs[pi]
		t := &r.agents[p.agent].targets[p.target]
		if excluded[p.dst] || excluded[p.src] || isLBPath(t) {
			continue
		}
		n := nodes[p.src]
		if n == nil {
			n = &tally{}
			nodes[p.src] = n
		}
		n.sent += p.sent
		n.lost += p.lost
	}
	racks := map[string]*rack{}
	for _, d := range sortedKeys(nodes) {
		n := nodes[d]
		name := rackOf(d)
		if name == "" {
			// Neither a traced ToR nor a group label: nothing says
			// which nodes share a ToR, and lumping them all into one
			// nameless rack would blame a ToR that may not exist.
			continue
		}
		rk := racks[name]
		if rk == nil {
			rk = &rack{}
			racks[name] = rk
		}
		rk.nodes++
		if ok, _ := th.significant(float64(n.lost), float64(n.sent)); ok {
			rk.sick++
			rk.t.sent += n.sent
			rk.t.lost += n.lost
			rk.sickNames = append(rk.sickNames, r.devName[d])
		}
	}
	var sick []string
	var all tally
	for _, name := range sortedKeys(racks) {
		rk := racks[name]
		if rk.nodes >= 2 && float64(rk.sick) >= th.RackShare*float64(rk.nodes) {
			sick = append(sick, name)
			all.sent += rk.t.sent
			all.lost += rk.t.lost
		}
	}
	if len(sick) == 0 {
		return nil
	}
	if len(racks) >= 2 && len(sick) == len(racks) {
		c := candidate{dev: -1}
		c.Kind, c.Name = KindTier, "spine"
		c.Addresses = upperTier(r)
		if len(c.Addresses) == 0 {
			c.Addresses = sick
		}
		_, c.conf = th.significant(float64(all.lost), float64(all.sent))
		c.EstimatedLoss = all.ratio()
		c.excess = float64(all.lost) - th.Healthy*float64(all.sent)
		c.Evidence = Evidence{Stage: "tier",
			Detail:     fmt.Sprintf("all %d racks have most nodes losing: the tier above the ToRs", len(sick)),
			LostProbes: float64(all.lost), SentProbes: float64(all.sent),
			PValue: upperTail(float64(all.lost), float64(all.sent), th.Healthy), Examples: []FlowRef{}}
		return []candidate{c}
	}
	var out []candidate
	for _, name := range sick {
		rk := racks[name]
		c := candidate{dev: -1}
		if d, ok := r.devID[name]; ok {
			c.dev = d
			c.Addresses = slices.Clone(r.devAddr[d])
		}
		if c.Addresses == nil {
			c.Addresses = []string{}
		}
		c.Kind, c.Name = KindDevice, name
		_, c.conf = th.significant(float64(rk.t.lost), float64(rk.t.sent))
		c.EstimatedLoss = rk.t.ratio()
		c.excess = float64(rk.t.lost) - th.Healthy*float64(rk.t.sent)
		c.Evidence = Evidence{Stage: "tier",
			Detail:     fmt.Sprintf("%d of the %d nodes behind it lose (%v): its ToR", rk.sick, rk.nodes, rk.sickNames),
			LostProbes: float64(rk.t.lost), SentProbes: float64(rk.t.sent),
			PValue: upperTail(float64(rk.t.lost), float64(rk.t.sent), th.Healthy), Examples: []FlowRef{}}
		out = append(out, c)
	}
	return out
}

// upperTier names the devices one hop above the access devices: no
// host, and no VIP (a one-arm LB hangs off the spines, it is no tier).
func upperTier(r *round) []string {
	acc := map[int32]bool{}
	for d := range r.devAcc {
		if sw := r.switchOf(int32(d)); r.devHost[d] && sw >= 0 {
			acc[sw] = true
		}
	}
	up := map[string]bool{}
	for _, lk := range r.links {
		if acc[lk.from] && !r.devHost[lk.to] && !r.devLB[lk.to] && !acc[lk.to] {
			up[r.devName[lk.to]] = true
		}
	}
	return sortedKeys(up)
}
