package matrix

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/netprober/prober/api"
)

// Rules for what is not the fabric. Each compares two sets of paths that
// share everything but the suspect, so the fabric cancels out.

type tally struct{ sent, lost uint64 }

func (t *tally) add(p *pair) { t.sent += p.sent; t.lost += p.lost }

func (t tally) ratio() float64 {
	if t.sent == 0 {
		return 0
	}
	return float64(t.lost) / float64(t.sent)
}

// clearlyWorse reports whether bad is significant, good is not, and bad's
// ratio is at least five times good's.
func (th *Thresholds) clearlyWorse(bad, good tally) (bool, float64) {
	ok, conf := th.significant(float64(bad.lost), float64(bad.sent))
	if !ok {
		return false, 0
	}
	if g, _ := th.significant(float64(good.lost), float64(good.sent)); g {
		return false, 0
	}
	if bad.ratio() < 5*good.ratio() {
		return false, 0
	}
	return true, conf
}

func isLBPath(t *targetRec) bool {
	return t.class == api.ClassLB || t.path == api.PathNodeToLB || t.path == api.PathPodToLB
}

// isPodPath: a path that starts or ends in a pod, to a pod or node.
func isPodPath(t *targetRec) bool {
	switch t.path {
	case api.PathPodToNode, api.PathPodToPod, api.PathNodeToPod:
		return true
	}
	return false
}

// lbRule blames a load balancer when its VIP paths lose while its
// backends' direct paths (or, when the agents do not list backends, the
// same sources' paths that leave their switch, as a VIP's do) are clean; or when at least two sources,
// and half of those probing it, see its established flows black-holed
// (HTTP/2 PINGs die while new flows pass: seed 001).
func lbRule(r *round, th *Thresholds) []candidate {
	type lb struct {
		vip, other, beyond tally
		sources            map[int32]bool
		// watchers are the sources that hold an established flow through
		// the VIP (http2_ping), so could see it black-holed; blackholed
		// those that do. Pod agents reach the API server's VIPs with
		// tcp_syn only: counted among the watchers, one node agent that
		// redialled after the fault kept the LB unnamed.
		watchers, blackholed map[int32]bool
		backends             map[string]bool
		addrs                map[string]bool
		pairs                []int32
	}
	lbs := map[int32]*lb{}
	for pi := range r.pairs {
		p := &r.pairs[pi]
		a := r.agents[p.agent]
		t := &a.targets[p.target]
		if !isLBPath(t) {
			continue
		}
		v := lbs[p.dst]
		if v == nil {
			v = &lb{sources: map[int32]bool{}, watchers: map[int32]bool{}, blackholed: map[int32]bool{}, backends: map[string]bool{}, addrs: map[string]bool{}}
			lbs[p.dst] = v
		}
		v.vip.add(p)
		v.sources[p.src] = true
		if t.blackhole {
			v.blackholed[p.src] = true
			v.watchers[p.src] = true
		}
		for _, pr := range a.protos[t.protoStart:t.protoEnd] {
			if pr.protocol == api.ProtocolHTTP2Ping {
				v.watchers[p.src] = true
			}
		}
		for _, b := range a.backends[t.backendStart:t.backendEnd] {
			v.backends[b] = true
		}
		if t.address != "" {
			v.addrs[t.address] = true
		}
		v.pairs = append(v.pairs, int32(pi))
	}
	// Each host's switch, once: the pairs are walked for every LB. A
	// pod no trace reached (a DNS endpoint, asked over DNS alone) is
	// behind its node's switch: counted as beyond its clients' switch,
	// its rack-local pairs made a VIP behind a lossy spine look worse
	// than its clients' other paths on the real cluster.
	sw := make([]int32, len(r.devName))
	for d := range sw {
		sw[d] = r.switchOf(int32(d))
	}
	for _, a := range r.agents {
		for ti := range a.targets {
			t := &a.targets[ti]
			if t.class != api.ClassPod || t.node == "" || !askedDNS(a, t) {
				continue
			}
			if d, ok := r.devID[t.name]; ok && sw[d] < 0 {
				if n, ok := r.devID[t.node]; ok {
					sw[d] = sw[n]
				}
			}
		}
	}
	var out []candidate
	for _, d := range sortedKeys(lbs) {
		v := lbs[d]
		for pi := range r.pairs {
			p := &r.pairs[pi]
			t := &r.agents[p.agent].targets[p.target]
			if isLBPath(t) {
				continue
			}
			if len(v.backends) > 0 && v.backends[t.name] || len(v.backends) == 0 && v.sources[p.src] {
				v.other.add(p)
				if sw[p.src] < 0 || sw[p.src] != sw[p.dst] {
					v.beyond.add(p)
				}
			}
		}
		what := "backends' direct paths"
		if len(v.backends) == 0 {
			// A VIP lies beyond its clients' own switch: compared with
			// their rack-local paths, a lossy spine between them and the
			// LB made the LB look lossy. Paths that leave the rack cross
			// what the VIP's do.
			what = "same sources' other paths"
			if v.beyond.sent > 0 {
				v.other, what = v.beyond, "same sources' paths beyond their switch"
			}
		}
		worse, conf := th.clearlyWorse(v.vip, v.other)
		bh := len(v.blackholed) >= 2 && 2*len(v.blackholed) >= len(v.watchers)
		if !worse && !bh {
			continue
		}
		c := candidate{dev: d}
		c.Kind, c.Name = KindLB, r.devName[d]
		c.Addresses = sortedKeys(v.addrs)
		c.Evidence = Evidence{Stage: "rule", LostProbes: float64(v.vip.lost), SentProbes: float64(v.vip.sent),
			PValue: upperTail(float64(v.vip.lost), float64(v.vip.sent), th.Healthy)}
		if worse {
			c.conf = conf
			c.EstimatedLoss = v.vip.ratio()
			c.excess = float64(v.vip.lost) - th.Healthy*float64(v.vip.sent)
			c.Evidence.Detail = fmt.Sprintf("VIP paths lose %.2g while the %s lose %.2g", v.vip.ratio(), what, v.other.ratio())
		} else {
			share := float64(len(v.blackholed)) / float64(len(v.watchers))
			c.conf = share
			c.EstimatedLoss = 1 // of established flows
			// Weigh it like a loss of every established-flow probe.
			c.excess = max(float64(v.vip.sent), 1) * share
			c.Evidence.Detail = fmt.Sprintf("%d of the %d sources holding established flows through it see them black-holed while new flows pass", len(v.blackholed), len(v.watchers))
		}
		for _, pi := range v.pairs {
			p := &r.pairs[pi]
			lossy := p.lost > 0 || r.agents[p.agent].targets[p.target].blackhole
			if lossy {
				c.Evidence.LossyFlows++
			} else {
				c.Evidence.CleanFlows++
			}
		}
		c.Evidence.Examples = pairExamples(r, v.pairs)
		out = append(out, c)
	}
	return out
}

// deferLBs drops the LB suspects that a fault judged per flow explains
// (flowFaultExplainsLB), ends being the hosts at either end of the flows
// it failed: from the lb rule's findings and the estimator's alike.
func (p *pass) deferLBs(ends map[int32]bool) {
	gone := map[int32]bool{}
	p.lbs = slices.DeleteFunc(p.lbs, func(c candidate) bool {
		gone[c.dev] = flowFaultExplainsLB(p.r, p.th, c.dev, ends)
		return gone[c.dev]
	})
	p.kept = slices.DeleteFunc(p.kept, func(c candidate) bool { return c.Kind == KindLB && gone[c.dev] })
}

// flowFaultExplainsLB reports whether a path MTU black hole or added
// delay explains what LB d loses: every source whose HTTP/2 PINGs
// through it die, or that sees its established flows black-holed, is an
// end of a flow the fault failed, and its small probes lose nothing
// significant. The PINGs ride a TLS connection whose handshake and
// responses carry full-size segments, which a hole takes while SYNs,
// pings and lookups pass; and a PING waits only its timeout, which a
// delay past it turns into loss. The symptom users meet, not the VIP's
// own doing: an LB that drops packets drops its SYNs too. (One that
// forgets established flows, seed 001, at the same time as a hole or a
// delay fails the very sources it fails is read as the latter alone.)
func flowFaultExplainsLB(r *round, th *Thresholds, d int32, ends map[int32]bool) bool {
	var small tally
	lossy := false
	for pi := range r.pairs {
		pr := &r.pairs[pi]
		if pr.dst != d {
			continue
		}
		a := r.agents[pr.agent]
		t := &a.targets[pr.target]
		if !isLBPath(t) {
			continue
		}
		cut := t.blackhole
		for _, proto := range a.protos[t.protoStart:t.protoEnd] {
			switch proto.protocol {
			case api.ProtocolHTTP2Ping:
				cut = cut || proto.stats.Lost > 0
			case api.ProtocolTCPSYNMTU:
			default:
				small.sent += proto.stats.Sent
				small.lost += min(proto.stats.Lost, proto.stats.Sent)
			}
		}
		if cut && !ends[pr.src] {
			return false
		}
		lossy = lossy || cut
	}
	bad, _ := th.significant(float64(small.lost), float64(small.sent))
	return lossy && !bad
}

// hostRule blames a host when its own paths, as a source or as a target,
// lose while the other hosts of its rack (same switch, else same group)
// do not: its NIC, cable or agent. Comparing with the rack is what makes
// a host beat its ToR.
//
// The comparison leaves out what the host itself explains: its rack-mates'
// pairs with it, and with the pods behind it (a pod's traffic crosses its
// node's NIC), and its own pods as rack-mates. And one host is blamed at
// a time, the one losing the most beyond the healthy rate, its pairs then
// taken out of every tally before the next: with the Pingmesh plan a
// rack-mate of a broken host may be the only one in its rack that probes
// it (node i of each rack probes node i of the others), and its paths to
// the broken host made it look broken too.
func hostRule(r *round, th *Thresholds, rackOf func(dev int32) string) []candidate {
	h := newHostTallies(r, rackOf)
	var out []candidate
	for {
		h.count(r)
		var best candidate
		var bestOut, bestIn bool
		for d := range int32(len(r.devName)) {
			c, wo, wi, ok := h.judge(r, th, d)
			if ok && (best.Name == "" || c.excess > best.excess) {
				best, bestOut, bestIn = c, wo, wi
			}
		}
		if best.Name == "" {
			return out
		}
		h.evidence(r, &best, bestOut, bestIn)
		out = append(out, best)
		h.blamed[best.dev] = true
	}
}

type hostSide struct{ out, in tally }

// hostTallies are the host rule's sums, per device and per rack, over the
// pairs that no host blamed so far explains.
type hostTallies struct {
	node    []int32 // the host a pod's traffic leaves through (d itself for a node)
	rack    []int32 // a host's rack, -1 for what is no host
	own     []hostSide
	sub     []hostSide // a node's subtree's (it and its pods)
	cross   []hostSide // pairs with rack-mates: out of it, into it
	crossSb []hostSide // the same for its subtree (nodes)
	racks   []hostSide
	seen    []bool
	blamed  []bool
}

func newHostTallies(r *round, rackOf func(dev int32) string) *hostTallies {
	nd := len(r.devName)
	h := &hostTallies{node: make([]int32, nd), rack: make([]int32, nd)}
	rackID := map[string]int32{}
	for d := range nd {
		h.node[d] = r.nodeOf(int32(d))
		h.rack[d] = -1
		if !r.devHost[d] || r.devLB[d] {
			continue
		}
		name := rackOf(int32(d))
		id, ok := rackID[name]
		if !ok {
			id = int32(len(rackID))
			rackID[name] = id
		}
		h.rack[d] = id
	}
	h.own, h.sub, h.cross, h.crossSb = make([]hostSide, nd), make([]hostSide, nd), make([]hostSide, nd), make([]hostSide, nd)
	h.racks = make([]hostSide, len(rackID))
	h.seen, h.blamed = make([]bool, nd), make([]bool, nd)
	return h
}

func (h *hostTallies) explained(p *pair) bool {
	return h.blamed[p.src] || h.blamed[p.dst] || h.blamed[h.node[p.src]] || h.blamed[h.node[p.dst]]
}

// count sums every pair to a host that is not explained yet.
func (h *hostTallies) count(r *round) {
	clear(h.own)
	clear(h.sub)
	clear(h.cross)
	clear(h.crossSb)
	clear(h.racks)
	for pi := range r.pairs {
		p := &r.pairs[pi]
		t := &r.agents[p.agent].targets[p.target]
		if isLBPath(t) || h.explained(p) {
			continue
		}
		s, d := p.src, p.dst
		h.seen[s] = true
		h.own[s].out.add(p)
		h.sub[h.node[s]].out.add(p)
		if rs := h.rack[s]; rs >= 0 {
			h.racks[rs].out.add(p)
		}
		if !r.devHost[d] || r.devLB[d] {
			continue
		}
		h.seen[d] = true
		h.own[d].in.add(p)
		h.sub[h.node[d]].in.add(p)
		if rd := h.rack[d]; rd >= 0 {
			h.racks[rd].in.add(p)
			if h.rack[s] == rd {
				h.cross[s].out.add(p)
				h.cross[d].in.add(p)
				if h.node[s] != h.node[d] {
					h.crossSb[h.node[s]].out.add(p)
					h.crossSb[h.node[d]].in.add(p)
				}
			}
		}
	}
}

// judge compares host d's paths out and in with what the rest of its rack
// sent and received, less d's subtree and its pairs with d's subtree; ok
// when d is clearly worse one way or both (wo, wi).
func (h *hostTallies) judge(r *round, th *Thresholds, d int32) (c candidate, wo, wi, ok bool) {
	if !h.seen[d] || h.blamed[d] || h.rack[d] < 0 {
		return c, false, false, false
	}
	whole, x := h.sub[d], h.crossSb[d]
	if h.node[d] != d { // a pod: its subtree is itself
		whole, x = h.own[d], h.cross[d]
	}
	rk := h.racks[h.rack[d]]
	peersOut := tally{rk.out.sent - whole.out.sent - x.in.sent, rk.out.lost - whole.out.lost - x.in.lost}
	peersIn := tally{rk.in.sent - whole.in.sent - x.out.sent, rk.in.lost - whole.in.lost - x.out.lost}
	if peersOut.sent == 0 && peersIn.sent == 0 {
		return c, false, false, false // alone in its rack: cannot tell it from its ToR
	}
	s := &h.own[d]
	wo, co := th.clearlyWorse(s.out, peersOut)
	wi, ci := th.clearlyWorse(s.in, peersIn)
	if !wo && !wi {
		return c, false, false, false
	}
	var lost, sent uint64
	var dir []string
	if wo {
		lost, sent = lost+s.out.lost, sent+s.out.sent
		dir = append(dir, fmt.Sprintf("its paths out lose %.2g (its rack's others %.2g)", s.out.ratio(), peersOut.ratio()))
	}
	if wi {
		lost, sent = lost+s.in.lost, sent+s.in.sent
		dir = append(dir, fmt.Sprintf("its paths in lose %.2g (its rack's others %.2g)", s.in.ratio(), peersIn.ratio()))
	}
	c = candidate{dev: d, conf: max(co, ci), excess: float64(lost) - th.Healthy*float64(sent)}
	c.Kind, c.Name = KindHost, r.devName[d]
	c.Addresses = slices.Clone(r.devAddr[d])
	c.EstimatedLoss = float64(lost) / float64(sent)
	c.Evidence = Evidence{Stage: "rule", Detail: strings.Join(dir, "; "),
		LostProbes: float64(lost), SentProbes: float64(sent),
		PValue: upperTail(float64(lost), float64(sent), th.Healthy)}
	return c, wo, wi, true
}

// evidence counts and samples the pairs c's host is blamed for.
func (h *hostTallies) evidence(r *round, c *candidate, out, in bool) {
	var ps []int32
	for pi := range r.pairs {
		p := &r.pairs[pi]
		if h.explained(p) {
			continue
		}
		if p.src == c.dev && out || p.dst == c.dev && in {
			ps = append(ps, int32(pi))
			if p.lost > 0 {
				c.Evidence.LossyFlows++
			} else {
				c.Evidence.CleanFlows++
			}
		}
	}
	c.Evidence.Examples = pairExamples(r, ps)
	c.pairs = ps
}

// fabricExplains reports whether the fabric accounts for the loss of the
// flows a rule blames c for: whether they lost no more than the fitted
// rates of the links they cross predict, at the rule's Alpha. The rules
// compare a node's pod paths with its node paths, a host with its
// rack-mates, by totals, and a lossy link that the ECMP hashes of one
// side's few flows happen to cross more often passes that comparison.
// A flow across a silent fabric (unseen) is predicted the lossy rate the
// fabric's other such flows show (unseenCross): the lossiest it may take.
//
// c's own links (those of its device, its node's pods) are left out of
// the prediction: they are what it is blamed for. A reply's middle is
// unknown, so each flow is predicted the lossiest the reply may take: a
// rule's suspect stays only when the fabric cannot account for its loss
// even so. cut holds the path ends explainPods took from flows.
func fabricExplains(r *round, e *estimator, th *Thresholds, c *candidate, podNode map[int32]string, cut map[int32]int32, u *unseenCross) bool {
	owner := c.Name
	if c.Kind == KindHost && c.dev >= 0 && podNode[c.dev] != "" {
		owner = "" // a pod's own links are its links to its node
	}
	own := func(d int32) bool {
		return d == c.dev || owner != "" && (r.devName[d] == owner || podNode[d] == owner)
	}
	rate := func(ls []int32) float64 {
		q := 0.0
		for _, l := range ls {
			if lk := r.links[l]; !own(lk.from) && !own(lk.to) {
				q += e.q[l]
			}
		}
		return q
	}
	var lost, sent, mean float64
	unseen := -1.0 // the silent fabric's rate, once a flow needs it
	for _, pi := range c.pairs {
		p := &r.pairs[pi]
		reply := -1.0 // the pair's, once a traced flow needs it
		for fi := p.flowStart; fi < p.flowEnd; fi++ {
			f := &r.flows[fi]
			end := f.linkEnd
			if x, ok := cut[fi]; ok {
				end = x
			}
			n := float64(f.sent)
			lost += float64(f.lost)
			sent += n
			q := 0.0 // an untraced flow's
			if fwd := r.flowLinks[f.linkStart:end]; len(fwd) > 0 {
				if reply < 0 {
					reply = e.replyRate(r, f.src, f.dst, rate)
				}
				q = rate(fwd) + reply
			} else if u != nil && u.cross(fi) {
				if unseen < 0 {
					unseen = u.rate(r, th, c.pairs, own)
				}
				q = unseen
			}
			mean += n * (1 - (1-th.Healthy)*math.Exp(-q))
		}
	}
	if sent == 0 {
		return false
	}
	return upperTail(lost, sent, min(1, mean/sent)) >= th.Alpha
}

// replyRate is the loss rate the fitted rates, as rate sums them, put on
// the replies of the pair src->dst: their access links and the lossiest
// of the middles they may take. 0 when dst is no host or its reverse path
// is unknown. It is the same for every flow of the pair.
func (e *estimator) replyRate(r *round, src, dst int32, rate func([]int32) float64) float64 {
	if !r.isHost(dst) {
		return 0
	}
	rev := e.reverse(r, src, dst)
	if !rev.known() {
		return 0
	}
	var buf [2 * maxAccess]int32
	q := rate(rev.links(&buf))
	if rev.mix >= 0 {
		worst := 0.0
		for _, cp := range e.components(r, rev.mix) {
			worst = max(worst, rate(cp.links))
		}
		q += worst
	}
	return q
}

// dataplaneRule blames a node's pod dataplane (CNI, veth, node
// forwarding) when the paths to and from its pods lose while its node
// paths do not. A pod's node comes from its "node" label.
//
// One node is blamed at a time, the one losing the most beyond its node
// paths, and the pairs with its pods are taken out of every tally before
// the next: a pod-to-pod pair counts for both ends' nodes, and the pods
// that probe a broken node's pod looked broken too. The pairs to the
// endpoints the endpoint rule blamed are the endpoints' own.
func dataplaneRule(r *round, th *Thresholds, endpoints map[string]bool) []candidate {
	if !slices.ContainsFunc(r.pairs, func(p pair) bool { return isPodPath(&r.agents[p.agent].targets[p.target]) }) {
		return nil
	}
	// Each pair's nodes: the source's and the target's, for pod paths
	// (-1: no pod end there), and the node paths' tallies, once.
	names := map[string]int32{}
	var nodeNames []string
	var node []tally // per node: its node paths
	id := func(n string) int32 {
		v, ok := names[n]
		if !ok {
			v = int32(len(nodeNames))
			names[n] = v
			nodeNames = append(nodeNames, n)
			node = append(node, tally{})
		}
		return v
	}
	r.podEnds = resize(r.podEnds, len(r.pairs))
	ends := r.podEnds
	for pi := range r.pairs {
		p := &r.pairs[pi]
		a := r.agents[p.agent]
		t := &a.targets[p.target]
		ends[pi] = [2]int32{-1, -1}
		switch {
		case isLBPath(t), endpoints[t.name]: // an endpoint the endpoint rule blamed
		case isPodPath(t):
			if a.class == api.ClassPod && a.node != "" {
				ends[pi][0] = id(a.node)
			}
			if t.class == api.ClassPod && t.node != "" && t.node != a.node {
				ends[pi][1] = id(t.node)
			}
		default:
			node[id(a.name)].add(p)
			if t.name != a.name {
				node[id(t.name)].add(p)
			}
		}
	}
	pod := make([]tally, len(nodeNames))
	blamed := make([]bool, len(nodeNames))
	explained := func(e [2]int32) bool { return e[0] >= 0 && blamed[e[0]] || e[1] >= 0 && blamed[e[1]] }
	var out []candidate
	for len(out) < maxRuleSuspects {
		clear(pod)
		for pi, e := range ends {
			if explained(e) {
				continue
			}
			for _, n := range e {
				if n >= 0 {
					pod[n].add(&r.pairs[pi])
				}
			}
		}
		best, bestExcess, bestConf := int32(-1), 0.0, 0.0
		for n := range int32(len(nodeNames)) {
			if blamed[n] {
				continue
			}
			worse, conf := th.clearlyWorse(pod[n], node[n])
			// What the node's own paths lose is the fabric's share,
			// which its pods' paths cross too (a lossy spine): only the
			// loss beyond it is the dataplane's.
			excess := float64(pod[n].lost) - max(th.Healthy, node[n].ratio())*float64(pod[n].sent)
			if worse && (best < 0 || excess > bestExcess || excess == bestExcess && nodeNames[n] < nodeNames[best]) {
				best, bestExcess, bestConf = n, excess, conf
			}
		}
		if best < 0 {
			return out
		}
		var ps []int32
		for pi, e := range ends {
			if (e[0] == best || e[1] == best) && !explained(e) {
				ps = append(ps, int32(pi))
			}
		}
		blamed[best] = true
		out = append(out, dataplaneCandidate(r, th, nodeNames[best], pod[best], node[best], bestExcess, bestConf, ps))
	}
	return out
}

// maxRuleSuspects bounds the suspects the dataplane rule names in a
// round: each costs a pass over every pair.
const maxRuleSuspects = 32

// dataplaneCandidate is node n's dataplane suspect, from its pod paths'
// and node paths' tallies and the pairs it explains.
func dataplaneCandidate(r *round, th *Thresholds, n string, pod, node tally, excess, conf float64, ps []int32) candidate {
	c := candidate{dev: -1, conf: conf, excess: excess, pairs: ps}
	if d, ok := r.devID[n]; ok {
		c.dev = d
	}
	c.Kind, c.Name = KindDataplane, n
	c.Addresses = []string{}
	if c.dev >= 0 {
		c.Addresses = slices.Clone(r.devAddr[c.dev])
	}
	c.EstimatedLoss = pod.ratio()
	c.Evidence = Evidence{Stage: "rule",
		Detail:     fmt.Sprintf("paths to and from its pods lose %.2g while its node paths lose %.2g: CNI or node forwarding", pod.ratio(), node.ratio()),
		LostProbes: float64(pod.lost), SentProbes: float64(pod.sent),
		PValue: upperTail(float64(pod.lost), float64(pod.sent), th.Healthy)}
	for _, pi := range ps {
		if r.pairs[pi].lost > 0 {
			c.Evidence.LossyFlows++
		} else {
			c.Evidence.CleanFlows++
		}
	}
	c.Evidence.Examples = pairExamples(r, ps)
	return c
}

// maxExamples is how many example flows a suspect lists.
const maxExamples = 3

// pairExamples picks the lossiest pairs, deterministically.
func pairExamples(r *round, ps []int32) []FlowRef {
	ps = slices.Clone(ps)
	slices.SortStableFunc(ps, func(x, y int32) int {
		return cmpU64(r.pairs[y].lost, r.pairs[x].lost)
	})
	out := []FlowRef{}
	for _, pi := range ps {
		p := &r.pairs[pi]
		if p.lost == 0 && !r.agents[p.agent].targets[p.target].blackhole || len(out) == maxExamples {
			break
		}
		a := r.agents[p.agent]
		t := &a.targets[p.target]
		out = append(out, FlowRef{Source: a.name, Target: t.name, Path: t.path, Family: t.family, Sent: p.sent, Lost: p.lost})
	}
	return out
}

func cmpU64(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func sortedKeys[K int32 | string, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
