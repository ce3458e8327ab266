package matrix

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/netprober/prober/api"
)

// localizer holds the scratch of Localize, reused across rounds.
type localizer struct {
	r  round
	e  estimator
	s  selector
	rt rackTallies // the tier stage's
	// ex[l] are the lossiest flows through link l, filled on first use
	// in a round.
	ex     [][maxExamples]int32
	exDone bool
}

// examples returns up to maxExamples of the lossiest traced flows through
// link l (forward path).
func (lc *localizer) examples(r *round, e *estimator, l int32) []int32 {
	if !lc.exDone {
		lc.exDone = true
		lc.ex = resize(lc.ex, len(r.links))
		for i := range lc.ex {
			lc.ex[i] = [maxExamples]int32{-1, -1, -1}
		}
		for _, fi := range e.lf {
			f := &r.flows[fi]
			for _, lk := range r.flowLinks[f.linkStart:f.linkEnd] {
				ex := &lc.ex[lk]
				// Insert keeping the lossiest first; ties keep the earlier.
				for j := range ex {
					if ex[j] < 0 || r.flows[ex[j]].lost < f.lost {
						copy(ex[j+1:], ex[j:len(ex)-1])
						ex[j] = fi
						break
					}
				}
			}
		}
	}
	var out []int32
	for _, fi := range lc.ex[l] {
		if fi >= 0 {
			out = append(out, fi)
		}
	}
	return out
}

// explainPods takes the flows of the pod paths that dataplane suspects
// explain out of the fabric's evidence: a node's lossy pod flows cross its
// ToR and the spines too, which would otherwise share the blame. It
// returns the path ends it cut, by flow, for fabricExplains.
func explainPods(r *round, dps []candidate) map[int32]int32 {
	var cut map[int32]int32
	for _, c := range dps {
		for _, pi := range c.pairs {
			p := &r.pairs[pi]
			for fi := p.flowStart; fi < p.flowEnd; fi++ {
				f := &r.flows[fi]
				if f.linkEnd == f.linkStart {
					continue
				}
				if cut == nil {
					cut = map[int32]int32{}
				}
				cut[fi] = f.linkEnd
				f.linkEnd = f.linkStart
			}
		}
	}
	return cut
}

// localize names what drops packets on the paths of agents' targets: it
// runs the stages (rules for lb, dataplane and host; the estimator over
// every traced flow; 007 voting; Pingmesh tier scoring) and merges what
// they find, highest score first, with the topology it traced. Localize
// calls it once per family.
func (m *Matrix) localize(agents []*agentState) ([]Suspect, Fabric) {
	fresh := agents
	r, e := &m.loc.r, &m.loc.e
	m.build(r, fresh)
	m.loc.exDone = false
	th := &m.cfg.Thresholds

	// A host's rack is the switch its traces show it hangs off, else its
	// rack label or the rack its first hop names (hostRacks, read over
	// every pair: only when some host does not trace), else its group
	// when GroupBy is a label.
	var racks map[string]string
	rackOf := func(d int32) string {
		if sw := r.switchOf(d); sw >= 0 {
			return r.devName[sw]
		}
		if racks == nil {
			racks = m.hostRacks(fresh)
		}
		if rk := racks[r.devName[d]]; rk != "" {
			return rk
		}
		if a := m.agents[r.devName[d]]; a != nil && m.cfg.GroupBy != "node" {
			return a.group
		}
		return ""
	}
	lbs := lbRule(r, th)
	eps, epNames := endpointRule(r, th)
	dps := dataplaneRule(r, th, epNames)
	hosts := append(eps, hostRule(r, th, rackOf)...)
	cut := explainPods(r, dps)
	e.fit(r)
	podNode := m.podNodes(r)
	unseen := newUnseenCross(r, rackOf)
	// A node's pods, or a host, whose flows' ECMP hashes happened to
	// cross a lossy link more often than their peers' did lose more with
	// nothing wrong of their own: what the fabric's fitted rates predict
	// for their flows decides.
	if kept := slices.DeleteFunc(slices.Clone(dps), func(c candidate) bool { return fabricExplains(r, e, th, &c, podNode, cut, unseen) }); len(kept) < len(dps) {
		// The flows of what the fabric explains are its evidence again.
		for fi, end := range cut {
			r.flows[fi].linkEnd = end
		}
		dps = kept
		cut = explainPods(r, dps)
		e.fit(r)
	}
	dpNodes := map[string]bool{}
	for _, c := range dps {
		dpNodes[c.Name] = true
	}
	// A pod behind a node whose dataplane loses is the dataplane's doing
	// (its own link is the dataplane's veth).
	hosts = slices.DeleteFunc(hosts, func(c candidate) bool {
		return dpNodes[podNode[c.dev]] || fabricExplains(r, e, th, &c, podNode, cut, unseen)
	})
	blames := vote(r, e, th)
	var ruleHosts []int32
	for _, c := range hosts {
		ruleHosts = append(ruleHosts, c.dev)
	}
	fab := fabricSuspects(r, e, &m.loc.s, th, ruleHosts)
	// The host rule compares a host with its rack-mates and knows
	// nothing of the fabric: a lossy link that the ECMP hashes of one
	// host's flows happen to cross more than its rack-mates' makes that
	// host look broken. Where the selector could weigh the host against
	// the fabric (its own links were traced), it decides.
	hosts = slices.DeleteFunc(hosts, func(c candidate) bool { return m.loc.s.rejected(c.dev) })

	// What the rules explain is not the fabric's.
	ruled := map[int32]bool{}
	for _, c := range slices.Concat(lbs, dps, hosts) {
		if c.dev >= 0 {
			ruled[c.dev] = true
		}
	}
	// A pod behind a node the rules name (its dataplane, its NIC) loses
	// what its node does.
	behind := maps.Clone(dpNodes)
	for _, c := range hosts {
		behind[c.Name] = true
	}
	for d, n := range podNode {
		if behind[n] {
			ruled[d] = true
		}
	}
	devices := map[int32]bool{}
	var kept []candidate
	lbFired := map[int32]bool{}
	for _, c := range lbs {
		lbFired[c.dev] = true
	}
	for _, c := range fab {
		// The estimator cannot see an LB's replies (its return path is
		// its own), so it names an LB only with the LB rule's consent.
		if c.Kind == KindLB && !lbFired[c.dev] {
			continue
		}
		if c.dev >= 0 && ruled[c.dev] && c.Kind != KindLB && c.Kind != KindHost {
			continue
		}
		if c.Kind == KindHost && behind[podNode[c.dev]] {
			continue
		}
		if c.Kind == KindLink {
			lk := r.links[c.links[0]]
			if ruled[lk.from] || ruled[lk.to] {
				continue
			}
		}
		if c.Kind == KindDevice {
			devices[c.dev] = true
		}
		kept = append(kept, c)
	}
	tiers := tierSuspects(r, &m.loc.rt, th, rackOf, ruled)
	for i := range tiers {
		if tiers[i].Kind == KindTier {
			m.tierFlows(r, th, &tiers[i])
		}
	}
	all := slices.Concat(lbs, dps, hosts, kept)
	fabricNamed := len(kept) > 0
	// Tier scoring sees only end-to-end totals, so a lossy spine makes
	// every rack it serves look sick. When traced paths name a device or
	// link, tier findings only confirm (merge with) what they name.
	for _, c := range tiers {
		if fabricNamed && (c.dev < 0 || !devices[c.dev]) {
			continue
		}
		all = append(all, c)
	}
	// A host behind a lossy device is that device's doing.
	all = slices.DeleteFunc(all, func(c candidate) bool {
		return c.Kind == KindHost && c.dev >= 0 && r.switchOf(c.dev) >= 0 && devices[r.switchOf(c.dev)]
	})
	// One suspect per kind and name: the stronger finding.
	slices.SortStableFunc(all, func(x, y candidate) int {
		return cmp.Or(strings.Compare(x.Kind, y.Kind), strings.Compare(x.Name, y.Name), cmp.Compare(y.conf*y.excess, x.conf*x.excess))
	})
	all = slices.CompactFunc(all, func(x, y candidate) bool { return x.Kind == y.Kind && x.Name == y.Name })

	total := 0.0
	for _, c := range all {
		total += max(c.excess, 0)
	}
	suspects := []Suspect{}
	for i := range all {
		c := &all[i]
		if total > 0 {
			c.Score = c.conf * max(c.excess, 0) / total
		}
		if c.Score < th.MinScore {
			continue
		}
		if c.Addresses == nil {
			c.Addresses = []string{}
		}
		if len(c.links) > 0 {
			m.linkEvidence(r, e, blames, c)
		}
		if c.Evidence.Examples == nil {
			c.Evidence.Examples = []FlowRef{}
		}
		suspects = append(suspects, c.Suspect)
	}
	sortSuspects(suspects)
	if racks == nil {
		racks = m.groupRacks(fresh)
	}
	return suspects, m.fabricOf(r, e, racks)
}

func sortSuspects(s []Suspect) {
	slices.SortStableFunc(s, func(x, y Suspect) int {
		return cmp.Or(cmp.Compare(y.Score, x.Score), strings.Compare(x.Kind, y.Kind), strings.Compare(x.Name, y.Name), strings.Compare(x.Family, y.Family))
	})
}

// podNodes maps pod devices to their node, from the "node" label.
func (m *Matrix) podNodes(r *round) map[int32]string {
	out := map[int32]string{}
	for _, a := range r.agents {
		if a.class == api.ClassPod && a.node != "" {
			out[r.devID[a.name]] = a.node
		}
		for ti := range a.targets {
			t := &a.targets[ti]
			if t.class == api.ClassPod && t.node != "" {
				if d, ok := r.devID[t.name]; ok {
					out[d] = t.node
				}
			}
		}
	}
	return out
}

// linkEvidence adds 007's votes and example flows to a suspect with links.
func (m *Matrix) linkEvidence(r *round, e *estimator, blames []blame, c *candidate) {
	var flows []int32
	for _, b := range blames {
		if slices.Contains(c.links, b.link) {
			c.Evidence.Votes += b.votes
			flows = append(flows, b.flows...)
		}
	}
	if len(flows) == 0 {
		for _, l := range c.links {
			flows = append(flows, m.loc.examples(r, e, l)...)
		}
		slices.Sort(flows)
		flows = slices.Compact(flows)
	}
	slices.SortStableFunc(flows, func(x, y int32) int { return cmpU64(r.flows[y].lost, r.flows[x].lost) })
	if len(flows) > maxExamples {
		flows = flows[:maxExamples]
	}
	for _, fi := range flows {
		c.Evidence.Examples = append(c.Evidence.Examples, m.flowRef(r, fi))
	}
}

// flowRef is traced flow fi as an example: its ends, its 5-tuple as far
// as the reports say it, its counts and its hops.
func (m *Matrix) flowRef(r *round, fi int32) FlowRef {
	f := &r.flows[fi]
	p := &r.pairs[f.pair]
	a := r.agents[p.agent]
	t := &a.targets[p.target]
	ref := FlowRef{Source: a.name, Target: t.name, Path: t.path, Family: t.family, Protocol: api.ProtocolTCPSYN,
		SourcePort: f.sourcePort, Sent: f.sent, Lost: f.lost,
		SourceAddress: a.sourceAddress(t.family), TargetAddress: t.address, TargetPort: t.port}
	for _, h := range a.hops[f.hopStart:f.hopEnd] {
		if h < 0 {
			ref.Hops = append(ref.Hops, "")
		} else {
			ref.Hops = append(ref.Hops, m.addrs[h])
		}
	}
	return ref
}
