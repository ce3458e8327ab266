package matrix

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/netprober/prober/api"
)

// Fabric returns the topology of the latest Localize.
func (m *Matrix) Fabric() Fabric {
	f := m.fabric
	if f.Devices == nil {
		f.Devices, f.Links = []FabricDevice{}, []FabricLink{}
	}
	return f
}

// fabricOf is the topology of round r with the estimator's link losses:
// hosts under the switch their traces show they hang off, ToRs, and the
// switches above them tiered by their distance from a ToR.
func (m *Matrix) fabricOf(r *round, e *estimator, racks map[string]string) Fabric {
	f := Fabric{Devices: make([]FabricDevice, len(r.devName)), Links: make([]FabricLink, len(r.links))}
	adj := make([][]int32, len(r.devName))
	// Each device's links' losses, flat by device (CSR): its colour is
	// their lower median. The worst link painted every ToR under a lossy
	// spine as lossy as the spine: a ToR's one bad uplink is the spine's.
	start := make([]int32, len(r.devName)+1)
	for _, lk := range r.links {
		start[lk.from+1]++
		start[lk.to+1]++
	}
	for d := range r.devName {
		start[d+1] += start[d]
	}
	losses, fill := make([]float64, start[len(r.devName)]), slices.Clone(start[:len(r.devName)])
	for l, lk := range r.links {
		loss := 0.0
		if l < len(e.q) {
			loss = rateToLoss(e.q[l])
		}
		flows := 0
		if l < len(e.lossyFlows) {
			flows = int(e.lossyFlows[l] + e.cleanFlows[l])
		}
		f.Links[l] = FabricLink{From: r.devName[lk.from], To: r.devName[lk.to], EstimatedLoss: loss, Flows: flows}
		for _, d := range []int32{lk.from, lk.to} {
			losses[fill[d]] = loss
			fill[d]++
		}
		if r.isSwitch(lk.from) && r.isSwitch(lk.to) {
			adj[lk.from] = append(adj[lk.from], lk.to)
			adj[lk.to] = append(adj[lk.to], lk.from)
		}
	}
	for d := range r.devName {
		if ls := losses[start[d]:start[d+1]]; len(ls) > 0 {
			slices.Sort(ls)
			f.Devices[d].EstimatedLoss = ls[(len(ls)-1)/2]
		}
	}
	tier := make([]int, len(r.devName))
	var queue []int32
	for d := range r.devName {
		h := int32(d)
		dev := &f.Devices[d]
		// A round's address lists are its own, never changed after build.
		dev.Name, dev.Addresses = r.devName[d], r.devAddr[d]
		if !r.isHost(h) {
			continue
		}
		dev.Role = RoleHost
		if a := m.agents[dev.Name]; a != nil {
			dev.Group = m.agentGroup(a, racks)
		}
		if acc := r.devAcc[h]; acc >= 0 && r.isHost(acc) {
			dev.Role, dev.Parent = RolePod, r.devName[acc]
		} else if sw := r.switchOf(h); sw >= 0 {
			dev.Parent = r.devName[sw]
			if tier[sw] == 0 {
				tier[sw] = 1
				queue = append(queue, sw)
			}
		}
	}
	// The switches above the ToRs, by breadth-first distance.
	top := 1
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		for _, n := range adj[d] {
			if tier[n] == 0 {
				tier[n] = tier[d] + 1
				top = max(top, tier[n])
				queue = append(queue, n)
			}
		}
	}
	for d := range f.Devices {
		dev := &f.Devices[d]
		switch {
		case r.devLB[d]:
			dev.Role = RoleLB
		case dev.Role != "":
		case tier[d] == 1:
			dev.Role, dev.Tier = RoleToR, 1
		default:
			// A switch no traced link joins to a ToR sits one above.
			dev.Role, dev.Tier = RoleSpine, max(tier[d], 2)
			top = max(top, dev.Tier)
		}
	}
	for d := range f.Devices {
		if f.Devices[d].Role == RoleLB {
			f.Devices[d].Tier = top + 1
		}
	}
	return f
}

// mergeFabrics joins the families' topologies: a device or link in both
// is one, with the worse loss and both families' flows.
func mergeFabrics(fs []Fabric) Fabric {
	if len(fs) == 1 {
		return fs[0]
	}
	out := Fabric{Devices: []FabricDevice{}, Links: []FabricLink{}}
	dev := map[string]int{}
	lnk := map[[2]string]int{}
	for _, f := range fs {
		for _, d := range f.Devices {
			i, ok := dev[d.Name]
			if !ok {
				dev[d.Name] = len(out.Devices)
				out.Devices = append(out.Devices, d)
				continue
			}
			o := &out.Devices[i]
			o.EstimatedLoss = max(o.EstimatedLoss, d.EstimatedLoss)
			o.Tier = max(o.Tier, d.Tier)
			o.Parent, o.Group = cmp.Or(o.Parent, d.Parent), cmp.Or(o.Group, d.Group)
			for _, a := range d.Addresses {
				if !slices.Contains(o.Addresses, a) {
					o.Addresses = append(slices.Clip(o.Addresses), a)
				}
			}
		}
		for _, l := range f.Links {
			k := [2]string{l.From, l.To}
			i, ok := lnk[k]
			if !ok {
				lnk[k] = len(out.Links)
				out.Links = append(out.Links, l)
				continue
			}
			out.Links[i].EstimatedLoss = max(out.Links[i].EstimatedLoss, l.EstimatedLoss)
			out.Links[i].Flows += l.Flows
		}
	}
	return out
}

// markSuspects marks the listed suspects' devices and links, and sorts
// the fabric so that it reads the same every round.
func markSuspects(f *Fabric, now time.Time, suspects []Suspect) {
	f.Time = now
	for _, s := range suspects {
		if s.Score < ListScore {
			continue
		}
		if from, to, ok := strings.Cut(s.Name, "->"); ok && (s.Kind == KindLink || s.Kind == KindPMTU || s.Kind == KindLatency) {
			for i := range f.Links {
				if f.Links[i].From == from && f.Links[i].To == to {
					f.Links[i].Suspect = true
				}
			}
			continue
		}
		for i := range f.Devices {
			if f.Devices[i].Name == s.Name && f.Devices[i].Suspect == "" {
				f.Devices[i].Suspect, f.Devices[i].EstimatedLoss = s.Kind, s.EstimatedLoss
			}
		}
	}
	slices.SortFunc(f.Devices, func(x, y FabricDevice) int {
		return cmp.Or(cmp.Compare(y.Tier, x.Tier), strings.Compare(x.Name, y.Name))
	})
	slices.SortFunc(f.Links, func(x, y FabricLink) int {
		return cmp.Or(strings.Compare(x.From, y.From), strings.Compare(x.To, y.To))
	})
}

// maxCrossing bounds Crossing's answer: a spine of a 5,000-node fabric
// is crossed by every rack pair.
const maxCrossing = 50_000

// Crossing lists the cells, at GroupBy, whose traced flows fresh at now
// cross device: a device or host name as the diagnosis names it, or a
// link "from->to". A host's own cells (as source or target) count, and a
// pod's flows cross its node.
func (m *Matrix) Crossing(now time.Time, device string) []CellRef {
	fresh, _ := m.fresh(now)
	racks := m.groupRacks(fresh)
	from, to, isLink := strings.Cut(device, "->")
	hostName := map[string]string{} // agents' addresses
	for _, a := range fresh {
		for _, ad := range append([]string{a.address}, a.addresses...) {
			if ad != "" {
				hostName[ad] = a.name
			}
		}
	}
	// Each traced address is named once per call: a 5,000-node round
	// holds millions of hops but thousands of addresses.
	named := make([]string, len(m.addrs))
	done := make([]bool, len(m.addrs))
	name := func(id int32) string {
		if id < 0 || int(id) >= len(named) {
			return ""
		}
		if !done[id] {
			s := m.addrs[id]
			named[id], done[id] = cmp.Or(m.deviceOfAddr(s), hostName[s], s), true
		}
		return named[id]
	}
	type key struct{ src, dst, path, family string }
	idx := map[key]int{}
	out := []CellRef{}
	var names []string
	for _, a := range fresh {
		for ti := range a.targets {
			t := &a.targets[ti]
			for pi := t.protoStart; pi < t.protoEnd; pi++ {
				p := &a.protos[pi]
				if p.protocol == api.ProtocolTCPSYNMTU {
					continue // tcp_syn's flows, untraced: their paths are tcp_syn's
				}
				for fi := p.flowStart; fi < p.flowEnd; fi++ {
					f := &a.flows[fi]
					names = append(names[:0], a.name)
					if a.node != "" && a.node != a.name {
						names = append(names, a.node)
					}
					for _, h := range a.hops[f.hopStart:f.hopEnd] {
						names = append(names, name(h))
					}
					// The target ends the path: its last hop, or after it.
					if n := len(names) - 1; n > 0 && (names[n] == t.name || names[n] == t.address) {
						names[n] = t.name
					} else {
						names = append(names, t.name)
					}
					if !pathCrosses(names, device, from, to, isLink) {
						continue
					}
					k := key{cmp.Or(m.agentGroup(a, racks), "unknown"), m.targetGroup(t, racks), t.path, t.family}
					i, ok := idx[k]
					if !ok {
						if len(out) == maxCrossing {
							continue
						}
						i = len(out)
						idx[k] = i
						out = append(out, CellRef{Source: k.src, Target: k.dst, Path: k.path, Family: k.family})
					}
					out[i].Flows++
					if f.lost > 0 {
						out[i].LossyFlows++
					}
				}
			}
		}
	}
	slices.SortFunc(out, func(x, y CellRef) int {
		return cmp.Or(strings.Compare(x.Path, y.Path), strings.Compare(x.Family, y.Family),
			strings.Compare(x.Source, y.Source), strings.Compare(x.Target, y.Target))
	})
	return out
}

// pathCrosses says whether the hop names cross device, or the link from
// -> to.
func pathCrosses(names []string, device, from, to string, isLink bool) bool {
	if !isLink {
		return slices.Contains(names, device)
	}
	for i := 1; i < len(names); i++ {
		if names[i-1] == from && names[i] == to {
			return true
		}
	}
	return false
}

// PairFor picks the pair to trace for a cell: among the fresh agents in
// group source probing a target in group target over path and family,
// the one whose tcp_syn probes (else any protocol's) lost most; family ""
// is either. ok is false when no fresh agent probes such a target.
func (m *Matrix) PairFor(now time.Time, source, target, path, family string) (Pair, bool) {
	fresh, _ := m.fresh(now)
	racks := m.groupRacks(fresh)
	var best Pair
	var bestAgent *agentState
	var bestProto int32
	bestRank, found := [3]uint64{}, false
	for _, a := range fresh {
		if cmp.Or(m.agentGroup(a, racks), "unknown") != source {
			continue
		}
		for ti := range a.targets {
			t := &a.targets[ti]
			if t.path != path || family != "" && t.family != family || m.targetGroup(t, racks) != target {
				continue
			}
			p := Pair{Agent: a.name, Target: t.name, Address: t.address, Path: t.path, Family: t.family}
			var syn uint64
			proto := int32(-1)
			for pi := t.protoStart; pi < t.protoEnd; pi++ {
				st := &a.protos[pi].stats
				p.Sent += st.Sent
				p.Lost += st.Lost
				if a.protos[pi].protocol == api.ProtocolTCPSYN {
					syn, proto = st.Lost+1, pi // a pair probed over tcp_syn has flows to trace
				}
			}
			rank := [3]uint64{syn, p.Lost, p.Sent}
			if !found || slices.Compare(rank[:], bestRank[:]) > 0 {
				best, bestAgent, bestProto, bestRank, found = p, a, proto, rank, true
			}
		}
	}
	if found && bestProto >= 0 {
		pr := &bestAgent.protos[bestProto]
		best.Flows = map[uint16]PairFlow{}
		for fi := pr.flowStart; fi < pr.flowEnd; fi++ {
			f := &bestAgent.flows[fi]
			pf := PairFlow{Stats: api.Stats{Sent: f.sent, Lost: f.lost}}
			for _, h := range bestAgent.hops[f.hopStart:f.hopEnd] {
				if h < 0 {
					pf.Hops = append(pf.Hops, "")
				} else {
					pf.Hops = append(pf.Hops, m.addrs[h])
				}
			}
			best.Flows[f.sourcePort] = pf
		}
	}
	return best, found
}
