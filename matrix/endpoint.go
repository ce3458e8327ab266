package matrix

import (
	"fmt"

	"github.com/netprober/prober/api"
)

// endpointRule blames a pod target that reports nothing and is asked
// over DNS, an endpoint of the cluster DNS (its CoreDNS pods, which
// every agent asks directly), when the paths to it lose while the paths to and from its node, and to
// the node's other pods, do not: the endpoint itself (its process, its
// socket, a filter on its port) drops. Its node's NIC, its node's
// dataplane or the fabric would make those lose too. Without such paths
// to compare with, it blames nothing. It returns the endpoints it
// blames by name: their pairs are no other rule's evidence.
func endpointRule(r *round, th *Thresholds) ([]candidate, map[string]bool) {
	reporting := make(map[string]bool, len(r.agents))
	for _, a := range r.agents {
		reporting[a.name] = true
	}
	type endpoint struct {
		in, other tally
		node      string
		dev       int32
		pairs     []int32
	}
	eps := map[string]*endpoint{}
	onNode := map[string][]string{} // node -> its endpoints
	for pi := range r.pairs {
		p := &r.pairs[pi]
		t := &r.agents[p.agent].targets[p.target]
		// A pod agent the matrix cannot pull reports nothing either:
		// its node's dataplane is the dataplane rule's to judge.
		if isLBPath(t) || t.class != api.ClassPod || t.node == "" || reporting[t.name] || !askedDNS(r.agents[p.agent], t) {
			continue
		}
		e := eps[t.name]
		if e == nil {
			e = &endpoint{node: t.node, dev: p.dst}
			eps[t.name] = e
			onNode[t.node] = append(onNode[t.node], t.name)
		}
		e.in.add(p)
		e.pairs = append(e.pairs, int32(pi))
	}
	if len(eps) == 0 {
		return nil, nil
	}
	// The other paths of each endpoint's node: from or to the node or
	// any pod on it but the endpoint.
	nodeOf := func(name, class, node string) string {
		if class == api.ClassPod {
			return node
		}
		return name
	}
	for pi := range r.pairs {
		p := &r.pairs[pi]
		a := r.agents[p.agent]
		t := &a.targets[p.target]
		if isLBPath(t) {
			continue
		}
		src, dst := nodeOf(a.name, a.class, a.node), nodeOf(t.name, t.class, t.node)
		for _, n := range []string{src, dst} {
			for _, name := range onNode[n] {
				if name != t.name {
					eps[name].other.add(p)
				}
			}
			if src == dst {
				break // a pod and its own node: counted once
			}
		}
	}
	var out []candidate
	blamed := map[string]bool{}
	for _, name := range sortedKeys(eps) {
		e := eps[name]
		if e.other.sent == 0 {
			continue // nothing to tell the endpoint from its node by
		}
		worse, conf := th.clearlyWorse(e.in, e.other)
		if !worse {
			continue
		}
		c := candidate{dev: e.dev, conf: conf}
		c.Kind, c.Name = KindHost, name
		c.EstimatedLoss = e.in.ratio()
		c.excess = float64(e.in.lost) - max(th.Healthy, e.other.ratio())*float64(e.in.sent)
		c.Evidence = Evidence{Stage: "rule", LostProbes: float64(e.in.lost), SentProbes: float64(e.in.sent),
			PValue: upperTail(float64(e.in.lost), float64(e.in.sent), th.Healthy),
			Detail: fmt.Sprintf("paths to this endpoint lose %.2g while its node %s's other paths lose %.2g: the endpoint itself (its process, a filter on its port)",
				e.in.ratio(), e.node, e.other.ratio())}
		for _, pi := range e.pairs {
			if r.pairs[pi].lost > 0 {
				c.Evidence.LossyFlows++
			} else {
				c.Evidence.CleanFlows++
			}
		}
		c.Evidence.Examples = pairExamples(r, e.pairs)
		out = append(out, c)
		blamed[name] = true
	}
	return out, blamed
}

// askedDNS reports whether a's reports on t hold a DNS protocol: t is a
// DNS server, no agent.
func askedDNS(a *agentState, t *targetRec) bool {
	for _, p := range a.protos[t.protoStart:t.protoEnd] {
		if p.protocol == api.ProtocolDNSUDP || p.protocol == api.ProtocolDNSTCP {
			return true
		}
	}
	return false
}
