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
	lat    latencyScratch // the latency stage's, kept for the next round
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
// runs the stages in order over one pass and merges what they find,
// highest score first, with the topology it traced. Localize calls it
// once per family.
func (m *Matrix) localize(agents []*agentState) ([]Suspect, []Dispute, Fabric) {
	p := m.newPass(agents)
	p.rules()        // lb, endpoint, dataplane and host rules
	p.fitFabric()    // the estimator; rule findings the fabric explains go
	p.selectFabric() // 007 voting and the selector over the traced links
	p.arbitrate()    // what the rules explain is not the fabric's
	p.scoreTiers()   // Pingmesh tier scoring, confirming what traces name
	pmtu, ends := p.pmtuSuspects()
	if len(pmtu) > 0 {
		p.deferLBs(ends) // an LB whose TLS flows die in the hole
	}
	lat := p.latencySuspects()
	if len(lat) > 0 {
		p.deferLBs(p.slowEnds()) // an LB whose PINGs time out behind the delay
	}
	suspects := append(append(p.merge(), shareScores(pmtu)...), shareScores(lat)...)
	sortSuspects(suspects)
	return suspects, p.disputes(), m.fabricOf(p.r, p.e, p.groupRacks())
}

// disputes are what the selector and the tier stage refused on the
// sources' word, sorted.
func (p *pass) disputes() []Dispute {
	var out []Dispute
	names := func(ds []int32) []string {
		out := make([]string, len(ds))
		for i, d := range ds {
			out[i] = p.r.devName[d]
		}
		slices.Sort(out)
		return out
	}
	for _, d := range slices.Concat(p.m.loc.s.disputes, p.m.loc.rt.disputes) {
		out = append(out, Dispute{Kind: d.kind, Name: d.name, Confirming: d.confirm, Contradicting: d.contradict,
			Confirmers: names(d.confirmers), Contradictors: names(d.contradicts)})
	}
	slices.SortFunc(out, func(a, b Dispute) int {
		return cmp.Or(strings.Compare(a.Kind, b.Kind), strings.Compare(a.Name, b.Name))
	})
	return out
}

// pass is one localize: the round, and what each stage found for the
// stages after it.
type pass struct {
	m     *Matrix
	r     *round
	e     *estimator
	th    *Thresholds
	fresh []*agentState
	racks map[string]string // hostRacks, read on first need

	lbs, eps, dps, hosts []candidate
	epNames              map[string]bool
	cut                  map[int32]int32  // explainPods' cut path ends
	podNode              map[int32]string // pod device -> its node
	unseen               *unseenCross
	dpNodes              map[string]bool
	blames               []blame
	fab                  []candidate // the selector's suspects
	kept                 []candidate // of fab, what the rules leave
	devices              map[int32]bool
	ruled                map[int32]bool
	slowAt               uint16 // the latency stage's slow round trip, in rttTicks; 0: no flow slow
}

func (m *Matrix) newPass(agents []*agentState) *pass {
	p := &pass{m: m, r: &m.loc.r, e: &m.loc.e, th: &m.cfg.Thresholds, fresh: agents}
	m.build(p.r, agents)
	m.loc.exDone = false
	return p
}

// rackOf is a host's rack: the switch its traces show it hangs off, else
// its rack label or the rack its first hop names (hostRacks, read over
// every pair: only when some host does not trace), else its group when
// GroupBy is a label.
func (p *pass) rackOf(d int32) string {
	r := p.r
	if sw := r.switchOf(d); sw >= 0 {
		return r.devName[sw]
	}
	if p.racks == nil {
		p.racks = p.m.hostRacks(p.fresh)
	}
	if rk := p.racks[r.devName[d]]; rk != "" {
		return rk
	}
	if a := p.m.agents[r.devName[d]]; a != nil && p.m.cfg.GroupBy != "node" {
		return a.group
	}
	return ""
}

// groupRacks is the racks the fabric view groups hosts by.
func (p *pass) groupRacks() map[string]string {
	if p.racks == nil {
		p.racks = p.m.groupRacks(p.fresh)
	}
	return p.racks
}

// rules runs the rules that need no traced path: an LB whose backends
// are fine, a DNS endpoint, a node's dataplane, a host worse than its
// rack.
func (p *pass) rules() {
	p.lbs = lbRule(p.r, p.th)
	p.eps, p.epNames = endpointRule(p.r, p.th)
	p.dps = dataplaneRule(p.r, p.th, p.epNames)
	p.hosts = append(p.eps, hostRule(p.r, p.th, p.rackOf)...)
}

// fitFabric fits every link's rate without the pod paths the dataplane
// suspects explain, and drops the rule findings the fitted fabric
// explains.
func (p *pass) fitFabric() {
	r, e, th := p.r, p.e, p.th
	p.cut = explainPods(r, p.dps)
	e.fit(r)
	p.podNode = p.m.podNodes(r)
	p.unseen = newUnseenCross(r, p.rackOf)
	// A node's pods, or a host, whose flows' ECMP hashes happened to
	// cross a lossy link more often than their peers' did lose more with
	// nothing wrong of their own: what the fabric's fitted rates predict
	// for their flows decides.
	if kept := slices.DeleteFunc(slices.Clone(p.dps), func(c candidate) bool { return fabricExplains(r, e, th, &c, p.podNode, p.cut, p.unseen) }); len(kept) < len(p.dps) {
		// The flows of what the fabric explains are its evidence again.
		for fi, end := range p.cut {
			r.flows[fi].linkEnd = end
		}
		p.dps = kept
		p.cut = explainPods(r, p.dps)
		e.fit(r)
	}
	p.dpNodes = map[string]bool{}
	for _, c := range p.dps {
		p.dpNodes[c.Name] = true
	}
	// A pod behind a node whose dataplane loses is the dataplane's doing
	// (its own link is the dataplane's veth).
	p.hosts = slices.DeleteFunc(p.hosts, func(c candidate) bool {
		return p.dpNodes[p.podNode[c.dev]] || fabricExplains(r, e, th, &c, p.podNode, p.cut, p.unseen)
	})
}

// selectFabric votes over the traced lossy flows and runs the selector,
// which also weighs the host rule's hosts against the fabric.
func (p *pass) selectFabric() {
	p.blames = vote(p.r, p.e, p.th)
	var ruleHosts []int32
	for _, c := range p.hosts {
		ruleHosts = append(ruleHosts, c.dev)
	}
	p.fab = fabricSuspects(p.r, p.e, &p.m.loc.s, p.th, ruleHosts)
	// The host rule compares a host with its rack-mates and knows
	// nothing of the fabric: a lossy link that the ECMP hashes of one
	// host's flows happen to cross more than its rack-mates' makes that
	// host look broken. Where the selector could weigh the host against
	// the fabric (its own links were traced), it decides.
	p.hosts = slices.DeleteFunc(p.hosts, func(c candidate) bool { return p.m.loc.s.rejected(c.dev) })
}

// arbitrate keeps of the selector's suspects what the rules do not
// explain.
func (p *pass) arbitrate() {
	r := p.r
	p.ruled = map[int32]bool{}
	for _, c := range slices.Concat(p.lbs, p.dps, p.hosts) {
		if c.dev >= 0 {
			p.ruled[c.dev] = true
		}
	}
	// A pod behind a node the rules name (its dataplane, its NIC) loses
	// what its node does.
	behind := maps.Clone(p.dpNodes)
	for _, c := range p.hosts {
		behind[c.Name] = true
	}
	for d, n := range p.podNode {
		if behind[n] {
			p.ruled[d] = true
		}
	}
	p.devices = map[int32]bool{}
	lbFired := map[int32]bool{}
	for _, c := range p.lbs {
		lbFired[c.dev] = true
	}
	for _, c := range p.fab {
		// The estimator cannot see an LB's replies (its return path is
		// its own), so it names an LB only with the LB rule's consent.
		if c.Kind == KindLB && !lbFired[c.dev] {
			continue
		}
		if c.dev >= 0 && p.ruled[c.dev] && c.Kind != KindLB && c.Kind != KindHost {
			continue
		}
		if c.Kind == KindHost && behind[p.podNode[c.dev]] {
			continue
		}
		if c.Kind == KindLink {
			lk := r.links[c.links[0]]
			if p.ruled[lk.from] || p.ruled[lk.to] {
				continue
			}
		}
		if c.Kind == KindDevice {
			p.devices[c.dev] = true
		}
		p.kept = append(p.kept, c)
	}
}

// scoreTiers runs tier scoring over every pair and keeps what it finds
// where no traced path names a device or link, or where it names the
// same device: a lossy spine makes every rack it serves look sick.
func (p *pass) scoreTiers() {
	tiers := tierSuspects(p.r, &p.m.loc.rt, p.th, p.rackOf, p.ruled)
	fabricNamed := len(p.kept) > 0
	for i := range tiers {
		c := &tiers[i]
		if fabricNamed && (c.dev < 0 || !p.devices[c.dev]) {
			continue
		}
		if c.Kind == KindTier {
			p.m.tierFlows(p.r, p.th, c)
		}
		p.kept = append(p.kept, *c)
	}
}

// merge is every stage's findings, one per kind and name, scored by
// their share of the excess loss and sorted.
func (p *pass) merge() []Suspect {
	r, th := p.r, p.th
	all := slices.Concat(p.lbs, p.dps, p.hosts, p.kept)
	// A host behind a lossy device is that device's doing.
	all = slices.DeleteFunc(all, func(c candidate) bool {
		return c.Kind == KindHost && c.dev >= 0 && r.switchOf(c.dev) >= 0 && p.devices[r.switchOf(c.dev)]
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
			p.m.linkEvidence(r, p.e, p.blames, c)
		}
		if c.Evidence.Examples == nil {
			c.Evidence.Examples = []FlowRef{}
		}
		suspects = append(suspects, c.Suspect)
	}
	sortSuspects(suspects)
	return suspects
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
