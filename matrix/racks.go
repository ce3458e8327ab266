package matrix

import (
	"net/netip"

	"github.com/netprober/prober/api"
)

// rackLabel is the label that names a host's rack (Kubernetes discovery
// copies it from the Node label that kubernetes.rackLabel names).
const rackLabel = "rack"

// hopRack is the rack a node's first-hop router names (issue 14): its
// Hops device name when Hops covers the address, else the address
// itself; "" when firstHop is no address. In a routed leaf-spine a
// node's first hop is its ToR, so nodes with the same first hop share a
// rack, named as traces name that ToR.
func (m *Matrix) hopRack(firstHop string) string {
	a, err := netip.ParseAddr(firstHop)
	if err != nil {
		return ""
	}
	if name := m.hops.lookup(a); name != "" {
		return name
	}
	return firstHop
}

// hostRacks maps every agent of agents and every target they report to
// its rack, leaving out hosts of no known rack. A label always wins over
// inference, and a host's own report over another's view of it:
//
//  1. the rack label the host's own agent reports;
//  2. the rack label a prober reports for it as a target;
//  3. for a node agent, the rack its first hop names (hopRack); for a
//     pod agent, its node's rack (never its own first hop: that is its
//     node, not a rack);
//  4. for a pod target, its node's rack.
func (m *Matrix) hostRacks(agents []*agentState) map[string]string {
	out := map[string]string{}
	for _, a := range agents {
		if a.rack != "" {
			out[a.name] = a.rack
		}
	}
	for _, a := range agents {
		for ti := range a.targets {
			if t := &a.targets[ti]; t.rack != "" && out[t.name] == "" {
				out[t.name] = t.rack
			}
		}
	}
	for _, a := range agents {
		if a.class != api.ClassPod && a.hopRack != "" && out[a.name] == "" {
			out[a.name] = a.hopRack
		}
	}
	for _, a := range agents {
		if a.class == api.ClassPod && out[a.name] == "" {
			if rk := out[a.node]; rk != "" && a.node != a.name {
				out[a.name] = rk
			}
		}
	}
	for _, a := range agents {
		for ti := range a.targets {
			t := &a.targets[ti]
			if t.class == api.ClassPod && out[t.name] == "" && t.node != t.name {
				if rk := out[t.node]; rk != "" {
					out[t.name] = rk
				}
			}
		}
	}
	return out
}

// Racks maps the name of every agent with a fresh report to its rack:
// its rack label, else the rack inferred from its first hop (a pod
// agent's is its node's). Agents of no known rack are left out. Fresh is
// at most Window older than the newest report: the matrix has no clock.
// It is what a probe plan groups nodes by when they carry no rack label.
func (m *Matrix) Racks() map[string]string {
	var newest *agentState
	for _, a := range m.agents {
		if newest == nil || a.seen.After(newest.seen) {
			newest = a
		}
	}
	out := map[string]string{}
	if newest == nil {
		return out
	}
	fresh, _ := m.fresh(newest.seen)
	all := m.hostRacks(fresh)
	for _, a := range fresh {
		if rk := all[a.name]; rk != "" {
			out[a.name] = rk
		}
	}
	return out
}

// agentGroup is a's group in the Snapshot: its GroupBy label, or with
// GroupBy rack and no label, its rack from racks (hostRacks).
func (m *Matrix) agentGroup(a *agentState, racks map[string]string) string {
	if a.group == "" && m.cfg.GroupBy == rackLabel {
		return racks[a.name]
	}
	return a.group
}

// groupRacks is what agentGroup and targetGroup need of the hosts' racks:
// hostRacks when grouping by rack, else nothing.
func (m *Matrix) groupRacks(fresh []*agentState) map[string]string {
	if m.cfg.GroupBy != rackLabel {
		return nil
	}
	return m.hostRacks(fresh)
}
