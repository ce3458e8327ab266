package matrix

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/netprober/prober/api"
)

// Matrix holds every agent's latest observations and the state Localize
// carries across rounds (when each suspect first appeared).
type Matrix struct {
	cfg  Config
	hops hopTable

	agents map[string]*agentState

	// addrID interns traced hop addresses; addrs is the reverse.
	// compactAt is the size at which compactHops drops the addresses no
	// report holds any more.
	addrID    map[string]int32
	addrs     []string
	compactAt int
	// added counts the addresses the report being observed interned.
	added int

	// since is the first round each suspect (kind/name) appeared in.
	since map[string]time.Time

	loc localizer // scratch reused across Localize rounds
	// fabric is the topology the latest Localize traced.
	fabric Fabric
}

// agentState is one agent's latest report, in storage reused from report
// to report so that Observe allocates nothing in steady state. Strings are
// shared with the decoded observations (Go strings are immutable); slices
// are copied.
type agentState struct {
	name, class, address string
	// addresses are a dual-stack agent's, one per family; hostAddrs its
	// node's other interfaces' (api.Agent.HostAddresses).
	addresses, hostAddrs []string
	group, node          string // GroupBy value; the "node" label (pods)
	// rack is its rack label; hopRack the rack its first hop firstHop
	// names (racks.go), "" when it reported none.
	rack, firstHop, hopRack string
	seen                    time.Time

	targets []targetRec
	protos  []protoRec
	flows   []flowRec
	hops    []int32 // addrID per traced hop, -1 for a silent hop
	// hopStr[i] and hopPrev[i] remember the string and id at position
	// i of hops across reports.
	hopStr   []string
	hopPrev  []int32
	backends []string
	// view is this agent with one family's targets (famTargets), for a
	// dual-stack round (family.go).
	view       *agentState
	famTargets []targetRec
}

// sourceAddress is the address a probes from over family fam.
func (a *agentState) sourceAddress(fam string) string {
	for _, addr := range a.addresses {
		if api.AddressFamily(addr) == fam {
			return addr
		}
	}
	return a.address
}

type targetRec struct {
	name, address, class, path string
	family                     string
	group, node, rack          string
	blackhole                  bool
	port                       uint16
	protoStart, protoEnd       int32
	backendStart, backendEnd   int32
}

type protoRec struct {
	protocol           string
	stats              api.Stats
	notAnswering       bool // the target does not answer it: no data
	flowStart, flowEnd int32
}

type flowRec struct {
	sourcePort       uint16
	traced           bool
	suspectHop       int16
	rtt              uint16 // median round trip, in rttTicks (0: none answered)
	sent, lost       uint64
	hopStart, hopEnd int32
}

// New returns an empty Matrix, or every problem with cfg at once. Zero
// fields take their defaults (Config.SetDefaults); the ranges are
// Config.Check's.
func New(cfg Config) (*Matrix, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("matrix config: %w", err)
	}
	hops := parseHops(cfg.Hops, func(string, string, ...any) {})
	return &Matrix{
		cfg:       cfg,
		hops:      hops,
		agents:    map[string]*agentState{},
		addrID:    map[string]int32{},
		compactAt: minCompact,
		since:     map[string]time.Time{},
	}, nil
}

// Observe replaces the latest report of obs.Agent.Name, received at now.
// It copies what it keeps, so the caller may reuse obs afterwards. In
// steady state (the same agents reporting similar sizes) it allocates
// nothing.
func (m *Matrix) Observe(now time.Time, obs api.Observations) error {
	if obs.Agent.Name == "" {
		return errors.New("observations: agent.name is empty")
	}
	if obs.SchemaVersion != 0 && obs.SchemaVersion != api.SchemaVersion {
		return fmt.Errorf("observations from %.64s: schemaVersion %d, want %d", obs.Agent.Name, obs.SchemaVersion, api.SchemaVersion)
	}
	if err := checkReport(&obs); err != nil {
		return fmt.Errorf("observations from %.64s: %w", obs.Agent.Name, err)
	}
	a := m.agents[obs.Agent.Name]
	if a == nil {
		a = &agentState{name: strings.Clone(obs.Agent.Name)}
		m.agents[a.name] = a
	}
	a.class, a.address = obs.Agent.Class, obs.Agent.Address
	a.addresses = append(a.addresses[:0], obs.Agent.Addresses...)
	a.hostAddrs = append(a.hostAddrs[:0], obs.Agent.HostAddresses...)
	a.group = m.groupOf(a.name, obs.Agent.Labels)
	a.node = obs.Agent.Labels["node"]
	a.rack = obs.Agent.Labels[rackLabel]
	if obs.Agent.FirstHop != a.firstHop {
		// Resolved on change only: a first hop changes with the cabling.
		a.firstHop, a.hopRack = obs.Agent.FirstHop, m.hopRack(obs.Agent.FirstHop)
	}
	a.seen = now
	m.added = 0
	a.targets, a.protos, a.flows = a.targets[:0], a.protos[:0], a.flows[:0]
	a.hops, a.backends = a.hops[:0], a.backends[:0]
	for i := range obs.Targets {
		t := &obs.Targets[i]
		if t.Name == "" && t.Address == "" {
			continue
		}
		tr := targetRec{
			name: t.Name, address: t.Address, class: t.Class, path: t.Path,
			family: t.ProbedFamily(),
			group:  m.groupOf(t.Name, t.Labels), node: t.Labels["node"],
			blackhole:    t.EstablishedFlowBlackhole,
			port:         t.Port,
			protoStart:   int32(len(a.protos)),
			backendStart: int32(len(a.backends)),
		}
		tr.rack = tr.group // GroupBy rack: the label, looked up once
		if m.cfg.GroupBy != rackLabel {
			tr.rack = t.Labels[rackLabel]
		}
		if tr.name == "" {
			tr.name = t.Address
		}
		a.backends = append(a.backends, t.Backends[:min(len(t.Backends), api.MaxBackends)]...)
		tr.backendEnd = int32(len(a.backends))
		for j := range t.Protocols {
			p := &t.Protocols[j]
			pr := protoRec{protocol: p.Protocol, stats: p.Stats, notAnswering: p.NotAnswering, flowStart: int32(len(a.flows))}
			sanitize(&pr.stats)
			if pr.notAnswering {
				// No data, whatever counts a report sends beside the flag.
				pr.stats = api.Stats{Errors: pr.stats.Errors}
			} else {
				for k := range p.Flows {
					a.flows = append(a.flows, m.flowOf(a, &p.Flows[k]))
				}
			}
			pr.flowEnd = int32(len(a.flows))
			a.protos = append(a.protos, pr)
		}
		tr.protoEnd = int32(len(a.protos))
		a.targets = append(a.targets, tr)
	}
	if m.added > api.MaxNewAddrs {
		// A report full of addresses no trace ever showed: the agent's
		// reports go, this one and the last (half replaced already).
		delete(m.agents, a.name)
		m.compactHops()
		return fmt.Errorf("observations from %.64s: more than %d hop addresses new to the matrix in one report", a.name, api.MaxNewAddrs)
	}
	m.compactHops()
	return nil
}

// minCompact is the hop table's size below which it is never compacted.
const minCompact = 1 << 12

// compactHops renumbers the hop table to the addresses the agents' latest
// reports hold once it has doubled since the last time: paths change and
// a peer may report a new address every round, and the table must not
// grow for ever. Ids keep their order, so the table is compacted in place.
func (m *Matrix) compactHops() {
	if len(m.addrs) < m.compactAt {
		return
	}
	id := make([]int32, len(m.addrs)) // old id -> new id, -1 unused
	for i := range id {
		id[i] = -1
	}
	for _, a := range m.agents {
		for _, h := range a.hops {
			if h >= 0 {
				id[h] = 0
			}
		}
		for _, h := range a.hopPrev {
			if h >= 0 {
				id[h] = 0
			}
		}
	}
	n := int32(0)
	for old, addr := range m.addrs {
		if id[old] >= 0 {
			id[old] = n
			m.addrs[n] = addr
			n++
		}
	}
	// A new map: Go maps keep their buckets after deletes.
	m.addrID = make(map[string]int32, n)
	for i, addr := range m.addrs[:n] {
		m.addrID[addr] = int32(i)
	}
	clear(m.addrs[n:])
	m.addrs = m.addrs[:n]
	for _, a := range m.agents {
		for i, h := range a.hops {
			if h >= 0 {
				a.hops[i] = id[h]
			}
		}
		for i, h := range a.hopPrev {
			if h >= 0 {
				a.hopPrev[i] = id[h]
			}
		}
	}
	m.compactAt = max(minCompact, 2*len(m.addrs))
}

// sanitize makes agent-supplied stats consistent and bounded: counts and
// RTTs clamped, lost never above sent, and the ratio recomputed rather
// than trusted.
func sanitize(s *api.Stats) {
	s.Sent, s.Lost, s.Errors = clampCount(s.Sent), clampCount(s.Lost), clampCount(s.Errors)
	s.RTTP50, s.RTTP99 = clampSeconds(s.RTTP50), clampSeconds(s.RTTP99)
	if s.Lost > s.Sent {
		s.Lost = s.Sent
	}
	s.LossRatio = 0
	if s.Sent > 0 {
		s.LossRatio = float64(s.Lost) / float64(s.Sent)
	}
}

func (m *Matrix) flowOf(a *agentState, f *api.Flow) flowRec {
	fr := flowRec{sourcePort: f.SourcePort, sent: clampCount(f.Sent), lost: clampCount(f.Lost), suspectHop: -1, rtt: rttTicks(f.RTTP50)}
	if fr.lost > fr.sent {
		fr.lost = fr.sent
	}
	fr.hopStart = int32(len(a.hops))
	if f.Path != nil && len(f.Path.Hops) > 0 {
		fr.traced = true
		if f.Path.SuspectHop >= 0 && f.Path.SuspectHop < len(f.Path.Hops) && f.Path.SuspectHop < 1<<15 {
			fr.suspectHop = int16(f.Path.SuspectHop)
		}
		hops := f.Path.Hops
		if len(hops) > api.MaxHops {
			hops = hops[:api.MaxHops]
		}
		for _, h := range hops {
			// Reports repeat last round's paths: comparing with the
			// string seen at this position is cheaper than hashing.
			i := len(a.hops)
			if i < len(a.hopStr) && a.hopStr[i] == h {
				a.hops = append(a.hops, a.hopPrev[i])
				continue
			}
			id := m.intern(h)
			a.hops = append(a.hops, id)
			if i < len(a.hopStr) {
				a.hopStr[i], a.hopPrev[i] = h, id
			} else {
				a.hopStr = append(a.hopStr, h)
				a.hopPrev = append(a.hopPrev, id)
			}
		}
	}
	fr.hopEnd = int32(len(a.hops))
	return fr
}

func (m *Matrix) intern(addr string) int32 {
	if addr == "" {
		return -1
	}
	if id, ok := m.addrID[addr]; ok {
		return id
	}
	if m.added++; m.added > api.MaxNewAddrs {
		return -1 // the report is refused (Observe)
	}
	id := int32(len(m.addrs))
	addr = strings.Clone(addr)
	m.addrs = append(m.addrs, addr)
	m.addrID[addr] = id
	return id
}

func (m *Matrix) groupOf(name string, labels map[string]string) string {
	if v := labels[m.cfg.GroupBy]; v != "" {
		return v
	}
	if m.cfg.GroupBy == "node" {
		if v := labels["node"]; v != "" {
			return v
		}
		return name
	}
	return ""
}

// Forget drops agent's report at once (it left the cluster).
func (m *Matrix) Forget(agent string) { delete(m.agents, agent) }

// fresh returns the agents whose last report is at most Window old at
// now, sorted by name.
func (m *Matrix) fresh(now time.Time) (fresh []*agentState, stale []*agentState) {
	for _, a := range m.agents {
		if now.Sub(a.seen) <= m.cfg.Window {
			fresh = append(fresh, a)
		} else {
			stale = append(stale, a)
		}
	}
	byName := func(x, y *agentState) int { return strings.Compare(x.name, y.name) }
	slices.SortFunc(fresh, byName)
	slices.SortFunc(stale, byName)
	return fresh, stale
}
