package hub

import (
	"net/netip"
	"slices"

	"github.com/netprober/prober/api"
	"github.com/netprober/prober/plan"
)

// vouch makes a report of an agent discovery knows say what discovery
// says: the agent's class, addresses and labels (node, zone, rack) and its
// targets' are taken from the plan, and a target the plan does not have,
// by name and address, is dropped with a count of them. An agent that
// lies about its rack or a target's would otherwise move flows into
// another rack's evidence. Reports of agents the plan does not know
// (static mode) are left as they are.
func vouch(p *plan.Plans, obs *api.Observations) (dropped int) {
	if p == nil {
		return 0
	}
	self, ok := p.Peer(obs.Agent.Name)
	if !ok || self.Class == api.ClassLB {
		return 0
	}
	obs.Agent.Class, obs.Agent.Address = self.Class, self.Address
	obs.Agent.Addresses, obs.Agent.Labels = self.Addresses, self.Labels
	kept := obs.Targets[:0]
	for _, t := range obs.Targets {
		peer, ok := p.Peer(t.Name)
		if !ok || !hasAddr(peer, t.Address) {
			dropped++
			continue
		}
		t.Class, t.Labels = peer.Class, peer.Labels
		kept = append(kept, t)
	}
	clear(obs.Targets[len(kept):])
	obs.Targets = kept
	return dropped
}

// hasAddr: addr is one of peer's addresses, however either is spelled.
func hasAddr(peer plan.Peer, addr string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	same := func(s string) bool {
		b, err := netip.ParseAddr(s)
		return err == nil && b.Unmap() == a.Unmap()
	}
	return same(peer.Address) || slices.ContainsFunc(peer.Addresses, same)
}
