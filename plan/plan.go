package plan

import (
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"hash/fnv"
	"maps"
	"slices"

	"github.com/netprober/prober/api"
)

// Peer is one agent or target of the plan: the wire type agents receive.
type Peer = api.Peer

// Label keys of a peer's Labels the plan reads and writes.
const (
	LabelNode = "node"
	LabelZone = "zone"
	LabelRack = "rack"
)

// Group sets every node and pod peer's Group in place: the node's rack
// label, else the rack inferred from its first hop (racks, by node name),
// else its zone label; a pod takes its node's. An inferred rack is also
// written as the rack label, so agents report it and targets carry it.
// Labels maps are copied before they are changed.
func Group(peers []Peer, racks map[string]string) {
	byNode := make(map[string]int, len(peers))
	for i := range peers {
		p := &peers[i]
		if p.Class != api.ClassNode {
			continue
		}
		byNode[p.Name] = i
		if p.Labels[LabelRack] == "" {
			setRack(p, racks[p.Name])
		}
		p.Group = cmp.Or(p.Labels[LabelRack], p.Labels[LabelZone])
	}
	for i := range peers {
		p := &peers[i]
		if p.Class != api.ClassPod {
			continue
		}
		node := cmp.Or(p.Node, p.Labels[LabelNode])
		p.Node = node
		n, ok := byNode[node]
		if !ok {
			p.Group = cmp.Or(p.Labels[LabelRack], p.Labels[LabelZone])
			continue
		}
		setRack(p, peers[n].Labels[LabelRack])
		p.Group = peers[n].Group
	}
}

// setRack writes rack as p's rack label, on a copy of its labels (they
// may be shared with discovery's snapshot); "" or the same rack changes
// nothing.
func setRack(p *Peer, rack string) {
	if rack == "" || p.Labels[LabelRack] == rack {
		return
	}
	p.Labels = maps.Clone(p.Labels)
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[LabelRack] = rack
}

// Agent returns the named agent's plan, with a version that changes
// whenever the plan does; ok is false for a name that is no agent. Pod
// agents reach the API server's VIPs with tcp_syn only: one HTTP/2
// connection per node to the API server (the node agent's, beside its
// kubelet's), not two (seed 003).
func (p *Plans) Agent(name string) (api.AgentPlan, bool) {
	i, ok := p.index[name]
	if !ok || p.targets[i] == nil {
		return api.AgentPlan{}, false
	}
	self := p.peers[i]
	out := api.AgentPlan{Name: self.Name, Class: self.Class, Address: self.Address, Group: self.Group,
		Node: self.Node, Labels: self.Labels, Targets: make([]Peer, len(p.targets[i]))}
	for k, j := range p.targets[i] {
		t := p.peers[j]
		// The pod behind a peer is the matrix's to check tokens with;
		// an agent needs none, and a restarted peer agent must not
		// change every plan that probes it.
		t.Pod, t.PodUID = "", ""
		if self.Class == api.ClassPod && t.HTTP2 != nil && t.HTTP2.APIServer {
			t.HTTP2 = &api.PeerHTTP2{Mode: api.HTTP2None}
		}
		out.Targets[k] = t
	}
	out.Version = version(out)
	return out, true
}

// Peer returns the named peer as the plan knows it: its class, addresses
// and labels (rack possibly inferred). The matrix takes these over what a
// report says of itself or of its targets.
func (p *Plans) Peer(name string) (Peer, bool) {
	i, ok := p.index[name]
	if !ok {
		return Peer{}, false
	}
	return p.peers[i], true
}

// ProbedBy returns the agents that probe the named peer, by name.
func (p *Plans) ProbedBy(name string) []string {
	j, ok := p.index[name]
	if !ok {
		return nil
	}
	var out []string
	for i, ts := range p.targets {
		if slices.Contains(ts, j) {
			out = append(out, p.peers[i].Name)
		}
	}
	return out
}

// version hashes everything an agent acts on: equal plans, equal
// versions, across processes and replicas. Hand-rolled rather than a hash
// of the JSON, which would encode every plan of the cluster at each
// rebuild; TestVersionCoversEveryField keeps it complete.
func version(a api.AgentPlan) string {
	h := fnv.New64a()
	var n [8]byte
	num := func(v uint64) {
		binary.LittleEndian.PutUint64(n[:], v)
		h.Write(n[:])
	}
	str := func(s string) {
		num(uint64(len(s)))
		h.Write([]byte(s))
	}
	labels := func(m map[string]string) {
		num(uint64(len(m)))
		for _, k := range slices.Sorted(maps.Keys(m)) {
			str(k)
			str(m[k])
		}
	}
	bit := func(b bool) uint64 {
		if b {
			return 1
		}
		return 0
	}
	str(a.Name)
	str(a.Class)
	str(a.Address)
	str(a.Group)
	str(a.Node)
	labels(a.Labels)
	for _, t := range a.Targets {
		str(t.Name)
		str(t.Class)
		str(t.Address)
		num(uint64(len(t.Addresses)))
		for _, a := range t.Addresses {
			str(a)
		}
		num(uint64(t.Port))
		str(t.Group)
		str(t.Node)
		labels(t.Labels)
		num(uint64(len(t.Backends)))
		for _, b := range t.Backends {
			str(b)
		}
		if t.DNS == nil {
			num(0)
		} else {
			num(1 + bit(t.DNS.Only))
			str(t.DNS.Query)
		}
		if t.HTTP2 == nil {
			num(0)
			continue
		}
		num(1 + bit(t.HTTP2.APIServer) + 2*bit(t.HTTP2.InsecureSkipVerify))
		str(t.HTTP2.Mode)
		str(t.HTTP2.ServerName)
	}
	return hex.EncodeToString(h.Sum(nil))
}
