package matrix

import (
	"net/netip"
	"slices"

	"github.com/netprober/prober/api"
)

// round is one Localize pass's view of the fresh reports: devices, the
// directed links between consecutive devices of traced paths, every
// flow and every (source, target) pair. Its slices are reused from round
// to round.
type round struct {
	agents []*agentState

	devName []string
	devID   map[string]int32
	devHost []bool // an agent or a target, not a Hops device
	// devLB marks the device of an lb target (its VIP). A VIP is never
	// the fabric: kube-proxy DNATs a ClusterIP on the source node, and a
	// real LB's own return path is out of sight, so only the lb rule
	// judges it.
	devLB []bool
	// devAcc is a host's access device: the first device its own traces
	// meet before their targets, -1 when unknown, accNone when its
	// traces reach their targets at the first hop (a flat network).
	devAcc []int32
	// devExit is the device traces reach a host through (the hop
	// before it), -1 when none reached it, -2 when they disagree.
	devExit []int32
	devAddr [][]string

	hostAddr map[string]int32 // agent and target addresses

	links  []link
	linkID map[uint64]int32
	lcache []linkSlot // direct-mapped cache in front of linkID

	flows     []rflow
	flowLinks []int32
	spare     []int32 // closeTails's scratch for flowLinks
	via       []int32 // bridgeRackMates's scratch: per link, the device between its hosts

	pairs []pair
	// podEnds is dataplaneRule's scratch: per pair, its pod ends' nodes.
	podEnds [][2]int32

	// mix[k] is how often each link lies between an entry and an exit
	// device over the traced flows that enter the fabric at one and
	// leave it at the other: the reverse path of a reply is unknown (its
	// own ECMP hash picks it), so it is modelled as this mixture.
	mixID   map[uint64]int32
	mixes   []mixture
	addrDev []int32

	mixLast    int32 // the mixture addMixture saw last, or -1
	mixLastKey uint64
	targetDev  []int32 // per pair, in build's order: the target's device
	// agentNode is, per agent, the device of the node a pod agent runs
	// on (its "node" label), or -1: a pod's first hop is its node.
	agentNode []int32
	// tunnels holds the nodes that a trace showed next to a node of
	// another switch (underlay): their pods' flows ride an overlay.
	tunnels map[int32]bool
}

// accessChain fills chain with h and the access devices up from it (a
// pod's node, the node's ToR) to the first that is no host, and returns
// how many; 0 when h is a VIP or no host. The chain stops early at a
// host whose access device is unknown or none (a flat network).
func (r *round) accessChain(h int32, chain *[maxAccess + 1]int32) int {
	if !r.devHost[h] || r.devLB[h] {
		return 0
	}
	n := 0
	for {
		chain[n] = h
		n++
		if !r.devHost[h] || n == len(chain) {
			return n
		}
		if h = r.devAcc[h]; h < 0 || r.devLB[h] {
			return n
		}
	}
}

// nodeOf is the host that host h's traffic leaves through: a pod's
// node, or h itself.
func (r *round) nodeOf(h int32) int32 {
	for range maxAccess {
		a := r.devAcc[h]
		if a < 0 || !r.devHost[a] || r.devLB[a] {
			return h
		}
		h = a
	}
	return h
}

// switchOf is the switch host h hangs off (a pod through its node), or
// -1 when it hangs off none that the traces show.
func (r *round) switchOf(h int32) int32 {
	var chain [maxAccess + 1]int32
	n := r.accessChain(h, &chain)
	if n == 0 || r.devHost[chain[n-1]] {
		return -1
	}
	return chain[n-1]
}

// isSwitch reports whether d is a device that is no host and no VIP;
// isHost whether it is a host and no VIP.
func (r *round) isSwitch(d int32) bool { return !r.devHost[d] && !r.devLB[d] }
func (r *round) isHost(d int32) bool   { return r.devHost[d] && !r.devLB[d] }

// accNone is devAcc of a host whose traces meet no device before their
// targets: nothing is in front of it that the matrix can name.
const accNone = -2

type link struct{ from, to int32 }

// A round looks up ~10 M (from, to) links among ~10 k: a direct-mapped
// cache that fits in L2 answers most of them without hashing into the map.
const linkCacheBits = 14

type linkSlot struct {
	key uint64
	id  int32 // link id + 1; 0 is empty
}

type mixture struct {
	flows int32
	links []int32 // link ids, with repeats: weight = count / flows
	ends  []int32 // where each sampled flow's middle ends in links
}

// maxMixFlows bounds the flows sampled per mixture; 64 flows see all of
// 16 equal-cost next hops with 99 % confidence (MDA).
const maxMixFlows = 64

type rflow struct {
	pair             int32
	sourcePort       uint16
	suspectHop       int16
	sent, lost       uint64
	linkStart        int32
	linkEnd          int32
	entry            int32 // the device it enters the fabric at, or -1
	src, dst         int32 // host devices
	hopStart, hopEnd int32 // into the agent's hops
	// tail is the last device a trace that stopped short of its target
	// heard (nothing after it answered), or -1.
	tail     int32
	complete bool // every hop answered and the path reached the target
	// unseen: traced, but no router between its ends answered, nor is
	// one known for them (unseenFabric): its middle is a silent fabric.
	unseen bool
	rtt    uint16 // median round trip, in rttTicks
}

type pair struct {
	agent, target int32 // index in round.agents, and in that agent's targets
	src, dst      int32 // host devices
	sent, lost    uint64
	flowStart     int32
	flowEnd       int32
}

func (r *round) device(name string, host bool) int32 {
	if id, ok := r.devID[name]; ok {
		if host {
			r.devHost[id] = true
		}
		return id
	}
	id := int32(len(r.devName))
	r.devID[name] = id
	r.devName = append(r.devName, name)
	r.devHost = append(r.devHost, host)
	r.devLB = append(r.devLB, false)
	r.devAcc = append(r.devAcc, -1)
	r.devExit = append(r.devExit, -1)
	r.devAddr = append(r.devAddr, nil)
	return id
}

func (r *round) linkOf(from, to int32) int32 {
	if id := r.lookupLink(from, to); id >= 0 {
		return id
	}
	k := linkKey(from, to)
	id := int32(len(r.links))
	r.linkID[k] = id
	r.links = append(r.links, link{from, to})
	s := r.linkSlot(k)
	s.key, s.id = k, id+1
	return id
}

// lookupLink returns the id of link (from, to), or -1; unlike linkOf it
// adds nothing.
func (r *round) lookupLink(from, to int32) int32 {
	k := linkKey(from, to)
	s := r.linkSlot(k)
	if s.id > 0 && s.key == k {
		return s.id - 1
	}
	id, ok := r.linkID[k]
	if !ok {
		return -1
	}
	s.key, s.id = k, id+1
	return id
}

func linkKey(from, to int32) uint64 { return uint64(uint32(from))<<32 | uint64(uint32(to)) }

// linkSlot is k's entry in the direct-mapped cache in front of linkID.
func (r *round) linkSlot(k uint64) *linkSlot {
	return &r.lcache[(k*0x9E3779B97F4A7C15)>>(64-linkCacheBits)]
}

func (r *round) reset(agents []*agentState) {
	r.agents = agents
	r.devName, r.devHost, r.devLB, r.devAcc, r.devExit, r.devAddr = r.devName[:0], r.devHost[:0], r.devLB[:0], r.devAcc[:0], r.devExit[:0], r.devAddr[:0]
	r.links, r.flows, r.flowLinks, r.pairs, r.mixes = r.links[:0], r.flows[:0], r.flowLinks[:0], r.pairs[:0], r.mixes[:0]
	r.devID = map[string]int32{}
	if r.hostAddr == nil {
		r.hostAddr = map[string]int32{}
	}
	clear(r.hostAddr) // keeps its storage: the same hosts next round
	r.linkID = map[uint64]int32{}
	r.mixID = map[uint64]int32{}
	r.lcache = resize(r.lcache, 1<<linkCacheBits)
	r.mixLast = -1
	r.targetDev = r.targetDev[:0]
	r.agentNode = r.agentNode[:0]
	if r.tunnels == nil {
		r.tunnels = map[int32]bool{}
	}
	clear(r.tunnels)
}

// build fills r from the fresh agents: the devices of agents and
// targets, then every pair's flows and the devices and links of their
// traced paths, then what those paths say about hosts that do not trace.
func (m *Matrix) build(r *round, agents []*agentState) {
	r.reset(agents)
	m.addEndpoints(r)
	r.addrDev = slices.Grow(r.addrDev[:0], len(m.addrs))[:len(m.addrs)]
	for i := range r.addrDev {
		r.addrDev[i] = -2 // resolved lazily: only addresses in fresh reports
	}
	m.findAccess(r)
	var tr tracer
	tr.reset()
	for ai, a := range agents {
		src := r.devID[a.name]
		tr.node = r.agentNode[ai]
		for ti := range a.targets {
			m.addPair(r, &tr, src, int32(ai), int32(ti))
		}
	}
	for d := range r.devAddr {
		slices.Sort(r.devAddr[d])
	}
	r.adoptExits()
	r.bridgeRackMates()
	r.unseenRackMates()
	r.overlayTails()
	r.closeTails()
}

// addEndpoints adds the devices of agents and targets, before any traced
// path: hosts first, so their ids do not depend on traced paths, and VIPs
// marked, so that no path takes one for the fabric whatever the order of
// the reports.
func (m *Matrix) addEndpoints(r *round) {
	for _, a := range r.agents {
		id := r.device(a.name, true)
		if a.address != "" {
			r.hostAddr[a.address] = id
		}
		for _, ad := range a.addresses {
			r.hostAddr[ad] = id
		}
	}
	// A pod's node, named by its "node" label, is a host too, reporting
	// or not: the pod's traffic leaves through it.
	for _, a := range r.agents {
		n := int32(-1)
		if a.class == api.ClassPod && a.node != "" && a.node != a.name {
			n = r.device(a.node, true)
		}
		r.agentNode = append(r.agentNode, n)
	}
	// A target whose address Hops covers (a VIP) is that device.
	targetDev := map[string]int32{}
	for _, a := range r.agents {
		for ti := range a.targets {
			t := &a.targets[ti]
			id, ok := targetDev[t.name]
			if !ok {
				id = m.targetDevice(r, t)
				targetDev[t.name] = id
			}
			if isLBPath(t) {
				r.devLB[id] = true
			}
			r.targetDev = append(r.targetDev, id)
		}
	}
	// A node's other addresses (a tunnel endpoint, a CNI gateway) are
	// the node's, unless an agent or target has one as its own: a report
	// cannot take another host's address, nor a Hops device's (resolve
	// looks Hops up first).
	for _, a := range r.agents {
		id := r.devID[a.name]
		for _, ad := range a.hostAddrs {
			if _, ok := r.hostAddr[ad]; !ok {
				r.hostAddr[ad] = id
			}
		}
	}
}

// targetDevice is t's device: the Hops device its address resolves to,
// else a host named after it.
func (m *Matrix) targetDevice(r *round, t *targetRec) int32 {
	if t.address != "" {
		if ad, err := netip.ParseAddr(t.address); err == nil {
			if name := m.hops.lookup(ad); name != "" {
				return r.device(name, false)
			}
		}
	}
	id := r.device(t.name, true)
	if t.address != "" {
		if _, ok := r.hostAddr[t.address]; !ok {
			r.hostAddr[t.address] = id
		}
	}
	return id
}

// resolve is the device of a traced address (an index into m.addrs): a
// Hops device, a known host, or the address itself; -1 for a silent hop.
// Small enough to inline: a round resolves millions of hops, nearly all
// seen before.
func (m *Matrix) resolve(r *round, id int32) int32 {
	if id >= 0 {
		if d := r.addrDev[id]; d != -2 {
			return d
		}
	}
	return m.resolveNew(r, id)
}

// resolveNew resolves an address the round has not met yet, or a silent
// hop.
func (m *Matrix) resolveNew(r *round, id int32) int32 {
	if id < 0 {
		return -1
	}
	s := m.addrs[id]
	var d int32
	if a, err := netip.ParseAddr(s); err == nil {
		if name := m.hops.lookup(a); name != "" {
			d = r.device(name, false)
		} else if h, ok := r.hostAddr[s]; ok {
			d = h
		} else {
			d = r.device(s, false)
		}
	} else if h, ok := r.hostAddr[s]; ok {
		d = h
	} else {
		d = r.device(s, false)
	}
	r.addrDev[id] = d
	r.devAddr[d] = append(r.devAddr[d], s)
	return d
}

// addPair adds the pair (agent ai, whose device is src; its target ti)
// and its flows.
func (m *Matrix) addPair(r *round, tr *tracer, src, ai, ti int32) {
	a := r.agents[ai]
	t := &a.targets[ti]
	dst := r.targetDev[len(r.pairs)]
	p := pair{agent: ai, target: ti, src: src, dst: dst, flowStart: int32(len(r.flows))}
	for pi := t.protoStart; pi < t.protoEnd; pi++ {
		pr := &a.protos[pi]
		if pr.protocol == api.ProtocolTCPSYNMTU {
			continue // a size that never passes is not random loss: pmtuSuspects
		}
		p.sent += pr.stats.Sent
		p.lost += pr.stats.Lost
		for fi := pr.flowStart; fi < pr.flowEnd; fi++ {
			f := &a.flows[fi]
			rf := rflow{
				pair: int32(len(r.pairs)), sourcePort: f.sourcePort,
				sent: f.sent, lost: f.lost, src: src, dst: dst,
				entry: -1, tail: -1, suspectHop: f.suspectHop, rtt: f.rtt,
				hopStart: f.hopStart, hopEnd: f.hopEnd,
				linkStart: int32(len(r.flowLinks)),
			}
			if f.traced {
				m.trace(r, tr, a.hops[f.hopStart:f.hopEnd], &rf)
			}
			rf.linkEnd = int32(len(r.flowLinks))
			r.flows = append(r.flows, rf)
		}
	}
	p.flowEnd = int32(len(r.flows))
	if p.lost > p.sent {
		p.lost = p.sent
	}
	r.pairs = append(r.pairs, p)
}

// underlay expands each hop of chain from a host straight to a host of
// another switch into the underlay between them: the first's switch, an
// unknown middle, the second's switch. An overlay shows a pod's trace its
// node, then the other node from its tunnel address (which that node's
// agent reports as its own: api.Agent.HostAddresses), then the pod: the
// encapsulated packet crossed both nodes' switches and a middle that the
// outer header's own ECMP hash picked, which no trace of the inner flow
// can show. The selector takes that middle as a mixture of the paths
// traced between the two switches, as it takes a reply's.
func (r *round) underlay(chain []int32) []int32 {
	for i := 0; i+1 < len(chain); i++ {
		a, b := chain[i], chain[i+1]
		if a < 0 || b < 0 || !r.isHost(a) || !r.isHost(b) {
			continue
		}
		sa, sb := r.switchOf(a), r.switchOf(b)
		if sa < 0 || sb < 0 || sa == sb {
			continue
		}
		chain = slices.Insert(chain, i+1, sa, -1, sb)
		r.tunnels[a], r.tunnels[b] = true, true
		i += 3
	}
	return chain
}

// unseenFabric reports whether chain crosses something no trace showed:
// a silent hop, and no device on it but hosts.
func (r *round) unseenFabric(chain []int32) bool {
	silent := false
	for _, d := range chain {
		if d < 0 {
			silent = true
		} else if r.isSwitch(d) {
			return false
		}
	}
	return silent
}

// tracer is build's scratch for turning traced hops into links.
type tracer struct {
	chain []int32 // the flow's devices, from its source; -1 a silent hop
	// node is the device of the source's node when the source is a pod,
	// else -1.
	node int32
	// Consecutive flows share most links: a per-position memo of the
	// last link seen there skips the map.
	memo   [8]link
	memoID [8]int32
}

func (tr *tracer) reset() {
	for i := range tr.memo {
		tr.memo[i] = link{-1, -1}
	}
}

// trace adds flow rf's traced path (hops): its links, where it enters
// and leaves the fabric, and what it says of its source's access device
// and of the device its target is reached through.
func (m *Matrix) trace(r *round, tr *tracer, hops []int32, rf *rflow) {
	src, dst := rf.src, rf.dst
	chain := append(tr.chain[:0], src)
	complete := true
	for i, h := range hops {
		d := m.resolve(r, h)
		if i == 0 && tr.node >= 0 && m.isNodeHop(r, h, d, tr.node) {
			d = tr.node
		}
		if d >= 0 && d == chain[len(chain)-1] {
			continue // one device answering twice
		}
		chain = append(chain, d)
	}
	chain = r.fillSilent(chain)
	chain = r.underlay(chain)
	if !r.devLB[dst] && r.unseenFabric(chain) {
		// No router between its ends answered, nor is one known for
		// them (a silent fabric, as a cloud VPC's): the hosts' own
		// links, all it shows, must not carry what the unseen middle
		// drops. The tier stage judges it from its totals.
		tr.chain = chain
		rf.complete, rf.unseen = false, true
		return
	}
	for _, d := range chain {
		if d < 0 {
			complete = false
		}
	}
	tr.chain = chain
	if r.devLB[dst] {
		r.vipTrace(chain, rf)
		return
	}
	tr.addLinks(r)
	if len(chain) < 2 { // only the source answered
		rf.complete = false
		return
	}
	last := chain[len(chain)-1]
	if last != dst {
		complete = false
	}
	// The fabric of a flow lies strictly between its source and its
	// target, and holds no VIP. A trace whose target answers first (a
	// flat network; a ClusterIP DNATed on the source node) meets no
	// device: it has no entry, and its target is not its source's
	// access device.
	if r.inFabric(chain[1], src, dst) {
		rf.entry = chain[1]
		if r.devAcc[src] < 0 {
			r.devAcc[src] = chain[1]
		}
	} else if chain[1] == dst && r.devAcc[src] == -1 {
		r.devAcc[src] = accNone
	}
	exit := chain[len(chain)-2]
	if last == dst && r.inFabric(exit, src, dst) {
		if complete && rf.entry >= 0 {
			r.sampleMixture(chain, r.flowLinks[rf.linkStart:])
		}
		r.sawExit(dst, exit)
	} else if last != dst {
		rf.tail = lastKnown(chain)
	}
	rf.complete = complete
}

// findAccess sets each agent's access device before any trace is read:
// the first device its traces meet, as trace would, so that silent hops
// can be filled (fillSilent) whatever the order of the flows.
func (m *Matrix) findAccess(r *round) {
	pi := 0
	for ai, a := range r.agents {
		src, node := r.devID[a.name], r.agentNode[ai]
		first := pi
		pi += len(a.targets)
	targets:
		for ti := range a.targets {
			t := &a.targets[ti]
			dst := r.targetDev[first+ti]
			for p := t.protoStart; p < t.protoEnd; p++ {
				pr := &a.protos[p]
				for fi := pr.flowStart; fi < pr.flowEnd; fi++ {
					f := &a.flows[fi]
					if !f.traced || f.hopStart == f.hopEnd {
						continue
					}
					h := a.hops[f.hopStart]
					d := m.resolve(r, h)
					if node >= 0 && m.isNodeHop(r, h, d, node) {
						d = node
					}
					if r.inFabric(d, src, dst) {
						r.devAcc[src] = d
						break targets
					}
					if d == dst && r.devAcc[src] == -1 {
						r.devAcc[src] = accNone
					}
				}
			}
		}
	}
}

// fillSilent names the silent hops of chain that the topology names: on
// the way up from the source, a hop right after a host is that host's
// access device (a pod's node, a node's ToR), and on the way down to the
// target, one right before a host is that host's. Only a silent hop
// between two switches stays unknown (which spine?). Without this, a
// trace whose first hop did not answer hid its source's access link, and
// the fit counted its loss on the rest of the path only; on the lab
// cluster a fifth of the first hops are silent.
func (r *round) fillSilent(chain []int32) []int32 {
	silent := false
	for _, d := range chain {
		silent = silent || d < 0
	}
	if !silent {
		return chain
	}
	acc := func(h int32) int32 {
		if h < 0 || !r.isHost(h) {
			return -1
		}
		if a := r.devAcc[h]; a >= 0 && !r.devLB[a] {
			return a
		}
		return -1
	}
	last := len(chain) - 1
	// A pod is reached through its node, on any network: first, so that
	// a node's silent hop to another node's pod over an overlay (the
	// tunnel's one hop) is not taken for the node's own switch.
	if n := acc(chain[last]); last >= 2 && chain[last-1] < 0 && n >= 0 && r.isHost(n) && n != chain[last-2] {
		chain[last-1] = n
	}
	for i := 1; i < last && (chain[i] < 0 || !r.isSwitch(chain[i])); i++ {
		if a := acc(chain[i-1]); chain[i] < 0 && a >= 0 && a != chain[i+1] {
			chain[i] = a
		}
	}
	for i := last - 1; i >= 1 && (chain[i] < 0 || !r.isSwitch(chain[i])); i-- {
		if a := acc(chain[i+1]); chain[i] < 0 && a >= 0 && a != chain[i-1] {
			chain[i] = a
		}
	}
	return chain
}

// isNodeHop reports whether a pod's first hop, address h resolved to
// device d, is its node: silent, or an address that neither Hops nor a
// known host claims. A pod's packets leave through its node; the node
// answers from its CNI's gateway address (198.19.101.33 for n12 in the
// lab cluster), which names nothing the matrix knows, and left as its
// own device it split the node in two: its losses were blamed on an
// address. Several nodes may answer from the same address (a CNI that
// gives every pod the same gateway), so the node comes from the pod's
// label, per trace, not from the address.
func (m *Matrix) isNodeHop(r *round, h, d, node int32) bool {
	if h < 0 {
		return true
	}
	if r.devHost[d] || r.devName[d] != m.addrs[h] {
		return false // a known host, or a Hops device
	}
	if a := m.addrs[h]; !slices.Contains(r.devAddr[node], a) {
		r.devAddr[node] = append(r.devAddr[node], a)
	}
	return true
}

// vipTrace reads a trace to a VIP. It shows the path only up to the
// address translation: the hops after it answer as the VIP (conntrack
// rewrites their errors on the way back), and the leg to the backend and
// the replies are hidden. The flow's loss may come from any of those, so
// its links feed no fabric estimate and no vote: it counts in the LB
// rule only. Its first hop still names the source's access device.
func (r *round) vipTrace(chain []int32, rf *rflow) {
	rf.complete = false
	if len(chain) >= 2 && r.inFabric(chain[1], rf.src, rf.dst) {
		rf.entry = chain[1]
		if r.devAcc[rf.src] < 0 {
			r.devAcc[rf.src] = chain[1]
		}
	}
}

// addLinks appends the links between the known consecutive devices of
// tr.chain to r.flowLinks.
func (tr *tracer) addLinks(r *round) {
	chain := tr.chain
	for i := 1; i < len(chain); i++ {
		if chain[i-1] < 0 || chain[i] < 0 {
			continue
		}
		if i < len(tr.memo) && tr.memo[i].from == chain[i-1] && tr.memo[i].to == chain[i] {
			r.flowLinks = append(r.flowLinks, tr.memoID[i])
			continue
		}
		id := r.linkOf(chain[i-1], chain[i])
		if i < len(tr.memo) {
			tr.memo[i], tr.memoID[i] = link{chain[i-1], chain[i]}, id
		}
		r.flowLinks = append(r.flowLinks, id)
	}
}

// inFabric reports whether device d, met on a trace from src to dst, is
// a device of that trace's fabric: known, neither of its ends, no VIP.
func (r *round) inFabric(d, src, dst int32) bool {
	return d >= 0 && d != src && d != dst && !r.devLB[d]
}

// sawExit notes that a trace reached host dst from device prev.
func (r *round) sawExit(dst, prev int32) {
	switch e := r.devExit[dst]; {
	case e == -1:
		r.devExit[dst] = prev
	case e != prev:
		r.devExit[dst] = -2
	}
}

// lastKnown is the last device of chain that answered, or -1.
func lastKnown(chain []int32) int32 {
	for i := len(chain) - 1; i > 0; i-- {
		if chain[i] >= 0 {
			return chain[i]
		}
	}
	return -1
}

// sampleMixture adds the middle of a complete trace (chain, one link
// per step in links) to the mixture between its two outermost switches:
// the first and the last device on it that is no host. A pod's trace
// passes its node before its ToR, and a trace to a pod its node after
// the other ToR; between the ToRs it samples the same paths as its
// node's traces, and the replies to it come back over them.
func (r *round) sampleMixture(chain, links []int32) {
	i0, i1 := -1, -1
	for i := 1; i < len(chain)-1; i++ {
		if d := chain[i]; !r.devHost[d] && !r.devLB[d] {
			if i0 < 0 {
				i0 = i
			}
			i1 = i
		}
	}
	if i0 < 0 || i0 == i1 {
		return // no switch, or one: no choice of path between them
	}
	r.addMixture(chain[i0], chain[i1], links[i0:i1])
}

func (r *round) addMixture(entry, exit int32, middle []int32) {
	k := uint64(uint32(entry))<<32 | uint64(uint32(exit))
	id := r.mixLast
	if id < 0 || r.mixLastKey != k {
		var ok bool
		id, ok = r.mixID[k]
		if !ok {
			id = int32(len(r.mixes))
			r.mixID[k] = id
			if len(r.mixes) < cap(r.mixes) { // reuse last round's storage
				r.mixes = r.mixes[:id+1]
				r.mixes[id].flows, r.mixes[id].links, r.mixes[id].ends = 0, r.mixes[id].links[:0], r.mixes[id].ends[:0]
			} else {
				r.mixes = append(r.mixes, mixture{})
			}
		}
		r.mixLast, r.mixLastKey = id, k
	}
	mx := &r.mixes[id]
	if mx.flows >= maxMixFlows {
		return
	}
	mx.flows++
	mx.links = append(mx.links, middle...)
	mx.ends = append(mx.ends, int32(len(mx.links)))
}

// middleGap reports whether a flow's links (its forward path) miss a
// stretch between two switches: a spine that did not answer. Which one
// the flow took is as unknown as a reply's path, and a likelihood that
// counts such a flow on the links it shows (its ToRs') and on none of
// the spines' credits the wrong hypotheses: on the simulated two-rack
// cluster a lossy ToR-spine link lost to the whole spine, which such
// flows' replies may cross. The selector leaves these flows out, lossy
// and clean alike: whether a spine answers a trace has nothing to do
// with the flow's loss.
func (r *round) middleGap(links []int32) bool {
	for i := 1; i < len(links); i++ {
		if a, b := r.links[links[i-1]].to, r.links[links[i]].from; a != b && r.isSwitch(a) && r.isSwitch(b) {
			return true
		}
	}
	return false
}

// mixtureOf returns the mixture between entry and exit, or nil.
func (r *round) mixtureOf(entry, exit int32) *mixture {
	if entry < 0 || exit < 0 {
		return nil
	}
	id, ok := r.mixID[uint64(uint32(entry))<<32|uint64(uint32(exit))]
	if !ok {
		return nil
	}
	return &r.mixes[id]
}

// linkName names a link "from->to".
func (r *round) linkName(l int32) string {
	return r.devName[r.links[l].from] + "->" + r.devName[r.links[l].to]
}
